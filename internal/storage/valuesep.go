package storage

import (
	"bytes"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultValueSeparation is the smallest value kept in blob files unless
// told otherwise (see Options.ValueSeparation and docs/performance.md,
// "Large values").
const DefaultValueSeparation = 1024

// separateValues configures Pebble's value separation: user values of at
// least minSize bytes go to blob files when memtables flush, and
// compactions then carry a reference to them instead of the value. Blob
// files whose values are mostly overwritten are rewritten (a quarter of
// garbage, once a file is a minute old). The short-lived spans
// (inlineSpans) keep their values inline.
func separateValues(po *pebble.Options, minSize int) {
	if minSize < 0 {
		return
	}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           minSize,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     time.Minute,
			TargetGarbageRatio:    0.25,
		}
	}
	po.Experimental.SpanPolicyFunc = inlineSpanPolicy
}

// inlineSpans are the key spans whose values stay in the sstables
// whatever their size, in key order: the node's metadata and every
// shard's Raft log and dedup table (below the data prefix), and every
// shard's change history (prefixHistory). Their records die soon — a log
// entry at the next truncation, a history event once --watch-history
// newer log indexes are applied — so in a blob file they would only turn
// into garbage, and the garbage would make Pebble rewrite the files
// together with the long-lived user values stored beside them. (A history
// event holds a write's new and replaced values: before the history span
// kept its values inline, the nhs volume test's nodes held about four
// times as many live blob bytes as user data.)
var inlineSpans = []pebble.KeyRange{
	{Start: []byte{prefixMeta}, End: []byte{prefixData}},
	{Start: []byte{prefixHistory}, End: []byte{prefixHistory + 1}},
}

// inlineSpanPolicy is Pebble's SpanPolicyFunc for inlineSpans: the policy
// of the span starting at startKey and the key where that policy ends.
func inlineSpanPolicy(startKey []byte) (pebble.SpanPolicy, []byte, error) {
	for _, s := range inlineSpans {
		switch {
		case bytes.Compare(startKey, s.End) >= 0:
			continue
		case bytes.Compare(startKey, s.Start) < 0:
			return pebble.SpanPolicy{}, s.Start, nil
		}
		return pebble.SpanPolicy{ValueStoragePolicy: pebble.ValueStorageLowReadLatency}, s.End, nil
	}
	return pebble.SpanPolicy{}, nil, nil
}

// WriteStats are the engine's bytes written to disk since it opened, by
// kind, for write amplification: WAL is the write-ahead log, Flushed and
// Compacted the sstables and blob files written by flushes and
// compactions, Ingested the sstables ingested (snapshots received).
type WriteStats struct {
	WAL, Flushed, Compacted, Ingested uint64
	// BlobFiles and BlobBytes are the live blob files and their size.
	BlobFiles, BlobBytes uint64
	// L0Sublevels is L0's read amplification now: Pebble compacts L0 at
	// L0CompactionThreshold and stops writes at L0StopWritesThreshold.
	L0Sublevels int
}

// Total is every byte written.
func (w WriteStats) Total() uint64 { return w.WAL + w.Flushed + w.Compacted + w.Ingested }

// WriteStats computes Pebble's metrics: call it at scrape time, not on a
// hot path. The sums are over the levels' own counters, not Pebble's
// Metrics.Total, which adds the WAL and ingested bytes to the flushed
// ones; and a flush's blob files are counted once, as flushed (Pebble
// also counts them as compacted: it sets BlobBytesCompacted for every
// table compaction, flushes included).
func (e *Engine) WriteStats() WriteStats {
	m := e.db.Metrics()
	var flushedTables, flushedBlobs, compactedTables, compactedBlobs, ingested uint64
	for i := range m.Levels {
		l := &m.Levels[i]
		flushedTables += l.TableBytesFlushed
		flushedBlobs += l.BlobBytesFlushed
		compactedTables += l.TableBytesCompacted
		compactedBlobs += l.BlobBytesCompacted
		ingested += l.TableBytesIngested
	}
	return WriteStats{
		WAL:         m.WAL.BytesWritten,
		Flushed:     flushedTables + flushedBlobs,
		Compacted:   compactedTables + compactedBlobs - min(flushedBlobs, compactedBlobs),
		Ingested:    ingested,
		BlobFiles:   m.BlobFiles.LiveCount,
		BlobBytes:   m.BlobFiles.LiveSize,
		L0Sublevels: int(m.Levels[0].Sublevels),
	}
}
