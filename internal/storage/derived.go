package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Maintenance of the derived indexes (index_keys.go) outside the apply
// path: after a snapshot replaced a token range's data, when a replica's
// data goes, and after a crash in the middle of either.
//
// Each such operation first writes (synced) a "derived pending" marker
// naming its token range, then works in batches, then deletes the marker.
// An engine that opens with a marker rebuilds that range's entries from
// its data before anything reads them, so after a crash the indexes agree
// with the data whatever step the crash cut.

// derivedBatchBytes bounds one batch of rebuild work.
const derivedBatchBytes = 1 << 20

func derivedMarkerPrefix() []byte { return MetaKey("derived-pending/") }

func derivedMarker(tokStart, tokEnd uint64) []byte {
	k := derivedMarkerPrefix()
	k = binary.BigEndian.AppendUint64(k, tokStart)
	return binary.BigEndian.AppendUint64(k, tokEnd)
}

// MarkDerivedPending stages in b the marker of token range [tokStart,
// tokEnd): an engine that opens with it rebuilds the range's derived
// entries from its data. A batch that deletes a range's data carries it,
// so that a crash before DropDerived has run leaves no entry of the range
// behind (DropDerived clears it).
func MarkDerivedPending(b *Batch, tokStart, tokEnd uint64) {
	b.Set(derivedMarker(tokStart, tokEnd), nil)
}

func (e *Engine) setMarker(tokStart, tokEnd uint64) error {
	b := e.NewBatch()
	MarkDerivedPending(b, tokStart, tokEnd)
	return b.Commit(true)
}

func (e *Engine) clearMarker(tokStart, tokEnd uint64) error {
	b := e.NewBatch()
	b.Delete(derivedMarker(tokStart, tokEnd))
	return b.Commit(false)
}

// inRange reports whether tok is in [start, end) (end 0 = 2^64).
func inRange(tok, start, end uint64) bool { return tok >= start && (end == 0 || tok < end) }

// RebuildDerived rebuilds the derived entries (key order and secondary
// indexes) of token range [tokStart, tokEnd) from the data keys: it
// deletes every entry whose token is in the range, then writes those of
// every object the range holds. It scans the node's whole derived space
// once and the range's data once. Crash-safe (see above). It must not run
// concurrently with writes to the range.
func (e *Engine) RebuildDerived(tokStart, tokEnd uint64) error {
	if err := e.setMarker(tokStart, tokEnd); err != nil {
		return err
	}
	if err := e.rebuild(tokStart, tokEnd); err != nil {
		return err
	}
	return e.clearMarker(tokStart, tokEnd)
}

// DropDerived deletes the derived entries whose token is in [tokStart,
// tokEnd), for a replica whose data is being removed. Crash-safe: a crash
// before it is done leaves a marker, and the rebuild at the next open
// writes entries only for the data still there (none, once the data is
// gone). Entries of a range the node holds no replica of are never
// served in any case: scans keep only entries of the shards they serve.
func (e *Engine) DropDerived(tokStart, tokEnd uint64) error {
	if err := e.setMarker(tokStart, tokEnd); err != nil {
		return err
	}
	if err := e.purgeDerived(tokStart, tokEnd); err != nil {
		return err
	}
	return e.clearMarker(tokStart, tokEnd)
}

// IngestDerived is Ingest of sstables that replace the data of token range
// [tokStart, tokEnd) (a received snapshot), keeping the derived indexes in
// step: it deletes the entries of the objects the range holds now, ingests,
// and writes the entries of the objects the range holds after, under a
// marker so that a crash at any step is repaired at the next open.
func (e *Engine) IngestDerived(paths []string, tokStart, tokEnd uint64) error {
	if err := e.setMarker(tokStart, tokEnd); err != nil {
		return err
	}
	if err := e.eachObject(tokStart, tokEnd, func(b *Batch, tok uint64, k, v []byte) error {
		_, terms, _, err := DecodeValueMeta(v)
		if err != nil {
			terms = nil // its index entries stay; the full rebuild after a restart drops them
		}
		derivedKeys(tok, k, terms, b.Delete)
		return nil
	}); err != nil {
		return err
	}
	if err := e.Ingest(paths); err != nil {
		return err
	}
	if err := e.addDerived(tokStart, tokEnd); err != nil {
		return err
	}
	return e.clearMarker(tokStart, tokEnd)
}

// rebuild is RebuildDerived's work, without the marker.
func (e *Engine) rebuild(tokStart, tokEnd uint64) error {
	if err := e.purgeDerived(tokStart, tokEnd); err != nil {
		return err
	}
	return e.addDerived(tokStart, tokEnd)
}

// purgeDerived deletes every derived entry whose token is in the range.
func (e *Engine) purgeDerived(tokStart, tokEnd uint64) error {
	it, err := e.NewIter([]byte{prefixKeyOrder}, []byte{prefixDerivedEnd})
	if err != nil {
		return err
	}
	b := e.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		tok, err := DerivedToken(it.Value())
		if err != nil || inRange(tok, tokStart, tokEnd) {
			b.Delete(it.Key())
		}
		if b.Len() >= derivedBatchBytes {
			if err := b.Commit(false); err != nil {
				it.Close()
				return err
			}
			b = e.NewBatch()
		}
	}
	if err := it.Close(); err != nil {
		b.Close()
		return err
	}
	return b.Commit(false)
}

// addDerived writes the derived entries of every object in the range.
func (e *Engine) addDerived(tokStart, tokEnd uint64) error {
	return e.eachObject(tokStart, tokEnd, func(b *Batch, tok uint64, k, v []byte) error {
		_, terms, _, err := DecodeValueMeta(v)
		if err != nil {
			return fmt.Errorf("storage: rebuild derived entries of %q: %w", k, err)
		}
		tv := tokenValue(tok)
		derivedKeys(tok, k, terms, func(key []byte) { b.Set(key, tv) })
		return nil
	})
}

// eachObject calls f with every object of the token range and a batch to
// stage writes in, committing the batches as they fill.
func (e *Engine) eachObject(tokStart, tokEnd uint64, f func(b *Batch, tok uint64, k, v []byte) error) error {
	lo, hi := DataSpan(tokStart, tokEnd)
	it, err := e.NewIter(lo, hi)
	if err != nil {
		return err
	}
	b := e.NewBatch()
	for ok := it.First(); ok; ok = it.Next() {
		tok, k, err := DecodeDataKey(it.Key())
		if err == nil {
			err = f(b, tok, k, it.Value())
		}
		if err == nil && b.Len() >= derivedBatchBytes {
			err = b.Commit(false)
			b = e.NewBatch()
		}
		if err != nil {
			it.Close()
			b.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		b.Close()
		return err
	}
	return b.Commit(false)
}

// derivedVersionKey records that the engine's derived indexes cover all
// its data: an engine written by a Cairn without them (its data dir
// predates indexes) has data but not the key, and is rebuilt whole once.
func derivedVersionKey() []byte { return MetaKey("derived-v1") }

// recoverDerived finishes, at open, the derived-index work a crash cut:
// every range with a marker is rebuilt from its data. Then an engine whose
// data predates the derived indexes gets them.
func (e *Engine) recoverDerived() error {
	if err := e.recoverMarkers(); err != nil {
		return err
	}
	if _, err := e.Get(derivedVersionKey()); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	lo, hi := DataSpan(0, 0)
	it, err := e.NewIter(lo, hi)
	if err != nil {
		return err
	}
	hasData := it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if hasData {
		if err := e.RebuildDerived(0, 0); err != nil {
			return err
		}
	}
	// Written past the engine's commit counters: opening is no commit of
	// the node's.
	if err := e.db.Set(derivedVersionKey(), nil, pebble.Sync); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

// recoverMarkers rebuilds every range with a marker.
func (e *Engine) recoverMarkers() error {
	p := derivedMarkerPrefix()
	it, err := e.NewIter(p, PrefixEnd(p))
	if err != nil {
		return err
	}
	var ranges [][2]uint64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(p):]
		if len(k) != 16 {
			it.Close()
			return fmt.Errorf("%w: derived marker %x", ErrCorrupt, it.Key())
		}
		ranges = append(ranges, [2]uint64{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])})
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, r := range ranges {
		if err := e.rebuild(r[0], r[1]); err != nil {
			return err
		}
		if err := e.clearMarker(r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}
