package storage

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// tombstoned writes n objects k00000… and deletes all but every gap-th
// (the deletions stay in the engine as tombstones): the live keys.
func tombstoned(t *testing.T, e *Engine, n, gap int) []string {
	t.Helper()
	var live []string
	b := e.NewBatch()
	for i := range n {
		k := []byte(fmt.Sprintf("k%05d", i))
		b.Set(DataKey(uint64(i), k), EncodeValueMeta(1, nil, []byte("v")))
		DerivedWrites(uint64(i), k, nil, false, nil, false, b.Delete, b.Set)
	}
	must(t, b.Commit(false))
	b = e.NewBatch()
	for i := range n {
		k := []byte(fmt.Sprintf("k%05d", i))
		if i%gap == 0 {
			live = append(live, string(k))
			continue
		}
		b.Delete(DataKey(uint64(i), k))
		DerivedWrites(uint64(i), k, nil, true, nil, true, b.Delete, b.Set)
	}
	must(t, b.Commit(false))
	return live
}

// pageThrough scans o's space page after page (each after the last one's
// Last) and returns the keys answered, in order, and the pages' lengths.
func pageThrough(t *testing.T, s *Snapshot, o ScanOptions) (keys []string, pages []int) {
	t.Helper()
	for range 1000 {
		out, err := s.Scan(o)
		must(t, err)
		for _, en := range out.Entries {
			keys = append(keys, string(en.Key))
		}
		pages = append(pages, len(out.Entries))
		if !out.More {
			return keys, pages
		}
		if len(out.Entries) > 0 && string(out.Last) != string(out.Entries[len(out.Entries)-1].Key) {
			t.Fatalf("a page ending at %q reports last %q", out.Entries[len(out.Entries)-1].Key, out.Last)
		}
		o.After = out.Last
	}
	t.Fatalf("no end after 1000 pages: %d keys", len(keys))
	return nil, nil
}

// A range of deleted keys not yet compacted away costs the scan a step
// over each tombstone, inside Pebble: MaxExamined counts them, so a scan
// over many ends early, with the live key it reached as Last, and the
// scans continued from there answer every live key exactly once.
func TestScanCountsTombstonesInItsWork(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	live := tombstoned(t, e, 20000, 5000)
	s := e.NewSnapshot()
	defer s.Close()
	keys, pages := pageThrough(t, s, ScanOptions{Limit: 1000, MaxBytes: 1 << 20, MaxExamined: 100, Values: true})
	if !slices.Equal(keys, live) {
		t.Fatalf("scanned %q, want %q", keys, live)
	}
	if len(pages) < len(live)-1 {
		t.Fatalf("pages of %v entries: a budget of 100 steps let a scan step over thousands of tombstones", pages)
	}
}

// A scan whose context is done ends at the first live key it reaches
// (its own steps over tombstones cannot be cut short): one entry, More,
// Last that key. Continued, such scans answer every live key exactly
// once, however many tombstones lie between them.
func TestScanEndsWhenItsContextIsDone(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	live := tombstoned(t, e, 20000, 2999) // tokens 0, 2999, 5998…: even and odd
	s := e.NewSnapshot()
	defer s.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, keep := range []func(uint64) bool{nil, func(tok uint64) bool { return tok%2 == 0 }} {
		want := live
		if keep != nil {
			want = slices.DeleteFunc(slices.Clone(live), func(k string) bool { tok, _ := strconv.Atoi(k[1:]); return tok%2 != 0 })
		}
		keys, pages := pageThrough(t, s, ScanOptions{Keep: keep, Limit: 1000, MaxBytes: 1 << 20, MaxExamined: 1 << 30, Ctx: done})
		if !slices.Equal(keys, want) {
			t.Fatalf("scanned %q, want %q", keys, want)
		}
		for i, n := range pages {
			if n > 1 {
				t.Fatalf("page %d of %v: %d entries after the context was done", i, pages, n)
			}
		}
	}
}
