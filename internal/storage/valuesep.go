package storage

import (
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
// garbage, once a file is a minute old). Keys below the data prefix — the
// node's metadata and every shard's Raft log and dedup table — keep their
// values inline: log entries die at the next truncation, and a blob file
// would only hold garbage.
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
	po.Experimental.SpanPolicyFunc = pebble.MakeStaticSpanPolicyFunc(pebble.DefaultComparer.Compare,
		pebble.KeyRange{Start: []byte{prefixMeta}, End: []byte{prefixData}},
		pebble.SpanPolicy{ValueStoragePolicy: pebble.ValueStorageLowReadLatency})
}

// WriteStats are the engine's bytes written to disk since it opened, by
// kind, for write amplification: WAL is the write-ahead log, Flushed and
// Compacted the sstables and blob files written by flushes and
// compactions, Ingested the sstables ingested (snapshots received).
type WriteStats struct {
	WAL, Flushed, Compacted, Ingested uint64
	// BlobFiles and BlobBytes are the live blob files and their size.
	BlobFiles, BlobBytes uint64
}

// Total is every byte written.
func (w WriteStats) Total() uint64 { return w.WAL + w.Flushed + w.Compacted + w.Ingested }

// WriteStats computes Pebble's metrics: call it at scrape time, not on a
// hot path.
func (e *Engine) WriteStats() WriteStats {
	m := e.db.Metrics()
	t := m.Total()
	return WriteStats{
		WAL:       m.WAL.BytesWritten,
		Flushed:   t.TableBytesFlushed + t.BlobBytesFlushed,
		Compacted: t.TableBytesCompacted + t.BlobBytesCompacted,
		Ingested:  t.TableBytesIngested,
		BlobFiles: m.BlobFiles.LiveCount,
		BlobBytes: m.BlobFiles.LiveSize,
	}
}
