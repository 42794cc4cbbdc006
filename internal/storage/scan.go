package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/wire"
	"github.com/cockroachdb/pebble/v2"
)

// ScanOptions of Snapshot.Scan.
type ScanOptions struct {
	// Index is the space scanned: "" the key order, else a secondary
	// index's name.
	Index string
	// From (inclusive), After (exclusive, nil: none) and To (exclusive,
	// nil: the space's end) bound the sort keys scanned.
	From, After, To []byte
	// Keep reports whether an entry of token tok is wanted.
	Keep func(tok uint64) bool
	// Limit bounds the entries returned; MaxBytes their sort keys, keys,
	// terms and values (at least one entry is returned); MaxExamined the
	// points the scan steps over (Iter.Steps): entries kept or not, and
	// the tombstones of deleted keys, which Pebble skips inside a step.
	Limit, MaxBytes, MaxExamined int
	// Values: read each entry's value and version.
	Values bool
	// Terms: with Values, in the key order, also each object's index
	// terms.
	Terms bool
	// Ctx, when set, ends the scan once it is done (checked at the first
	// entry reached, then every stopCheckSteps steps, tombstones
	// included): the answer is the entries found so far, More, and Last
	// the entry reached. Nil: never.
	Ctx context.Context
}

// stopCheckSteps: how many steps apart a scan checks ScanOptions.Ctx.
const stopCheckSteps = 1024

// ScanOutput is what Scan found.
type ScanOutput struct {
	Entries []wire.ScanEntry
	// More: the scan stopped before To; Last is the last sort key it
	// answered or passed over (a copy): an entry left out for the byte
	// bound is examined again by a scan continued after Last.
	More bool
	Last []byte
}

// Scan walks a derived ordered space of the snapshot (key order or one
// secondary index) in sort-key order and returns the entries Keep wants,
// with their values if asked, until a bound. Entries are copies.
func (s *Snapshot) Scan(o ScanOptions) (ScanOutput, error) {
	var prefix []byte
	if o.Index == "" {
		prefix = KeyOrderPrefix()
	} else {
		prefix = IndexPrefix(o.Index)
	}
	lo := append(append([]byte(nil), prefix...), o.From...)
	if o.After != nil {
		if a := append(append([]byte(nil), prefix...), o.After...); bytes.Compare(a, lo) >= 0 {
			lo = append(a, 0) // the smallest key after After
		}
	}
	hi := PrefixEnd(prefix)
	if o.To != nil {
		hi = append(append([]byte(nil), prefix...), o.To...)
	}
	var out ScanOutput
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return out, nil
	}
	it, err := s.NewIter(lo, hi)
	if err != nil {
		return out, err
	}
	out, err = s.scanIter(it, o, prefix)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return out, err
}

// scanIter is Scan's walk over it (positioned nowhere yet). The byte
// bound is kept exactly: an entry that would take the answer over
// MaxBytes is left for the next scan (unless it is the first), and Last
// stays the key examined before it.
//
// The work bounds (MaxExamined, Ctx) are checked after the entry a step
// reached is answered or passed over, and the scan then ends with it as
// Last: one step can cross any number of tombstones, and a scan
// continued after Last does not cross them again. So every scan moves
// past at least one entry, and a range of deleted keys is crossed once
// however many scans it takes.
func (s *Snapshot) scanIter(it *Iter, o ScanOptions, prefix []byte) (ScanOutput, error) {
	var out ScanOutput
	size := 0
	check := uint64(0) // the first step checks Ctx too
	for ok := it.First(); ok; ok = it.Next() {
		if len(out.Entries) >= o.Limit || (len(out.Entries) > 0 && size >= o.MaxBytes) {
			out.More = true
			return out, nil
		}
		sk := it.Key()[len(prefix):]
		tok, err := DerivedToken(it.Value())
		if err != nil {
			return out, err
		}
		if o.Keep == nil || o.Keep(tok) {
			e, err := s.scanEntry(o, sk, tok)
			if err != nil {
				return out, err
			}
			n := EntryBytes(e)
			if len(out.Entries) > 0 && size+n > o.MaxBytes {
				out.More = true
				return out, nil
			}
			size += n
			out.Entries = append(out.Entries, e)
		}
		out.Last = append(out.Last[:0], sk...)
		steps := it.Steps()
		if steps >= uint64(o.MaxExamined) {
			out.More = true
			return out, nil
		}
		if steps >= check && o.Ctx != nil {
			if o.Ctx.Err() != nil {
				out.More = true
				return out, nil
			}
			check = steps + stopCheckSteps
		}
	}
	return out, nil
}

// EntryBytes is what a scan entry counts towards a page's byte bound: its
// sort key (which holds the key), term, value and index terms.
func EntryBytes(e wire.ScanEntry) int {
	n := len(e.SortKey) + len(e.Term) + len(e.Value)
	for _, t := range e.Terms {
		n += len(t.Name) + len(t.Term)
	}
	return n
}

// scanEntry is the entry of sort key sk (token tok) a scan answers, with
// its value and version if o asks.
func (s *Snapshot) scanEntry(o ScanOptions, sk []byte, tok uint64) (wire.ScanEntry, error) {
	var err error
	e := wire.ScanEntry{SortKey: append([]byte(nil), sk...)}
	if o.Index == "" {
		e.Key = e.SortKey
	} else if e.Term, e.Key, err = SplitIndexSortKey(o.Index, e.SortKey); err != nil {
		return e, err
	}
	if !o.Values {
		return e, nil
	}
	v, err := s.Get(DataKey(tok, e.Key))
	if errors.Is(err, ErrNotFound) {
		return e, fmt.Errorf("%w: derived entry of %q without its object", ErrCorrupt, e.Key)
	}
	if err != nil {
		return e, err
	}
	if o.Terms && o.Index == "" {
		e.Version, e.Terms, e.Value, err = DecodeValueMeta(v)
	} else {
		e.Version, e.Value, err = DecodeValue(v)
	}
	return e, err
}

// Meta is what HeadValue reads of a stored object.
type Meta struct {
	Version uint64
	Size    int
	Terms   []wire.IndexTerm
}

// HeadValue reads the version, value size and index terms of the object
// under key without copying its value out of the engine. (With values
// stored inline, Pebble still reads the block that holds it.)
func (e *Engine) HeadValue(key []byte) (Meta, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return Meta{}, ErrNotFound
	}
	if err != nil {
		return Meta{}, fmt.Errorf("storage: get: %w", err)
	}
	defer closer.Close()
	version, terms, data, err := DecodeValueMeta(v)
	if err != nil {
		return Meta{}, err
	}
	m := Meta{Version: version, Size: len(data)}
	for _, t := range terms {
		m.Terms = append(m.Terms, wire.IndexTerm{Name: t.Name, Term: append([]byte(nil), t.Term...)})
	}
	return m, nil
}
