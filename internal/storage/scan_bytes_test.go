package storage

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// Scan's byte bound is a bound: it answers entries of at most MaxBytes
// together, and stops before an entry that would take it over (only a
// first entry is answered whatever its size). Last is then the last key
// it answered or skipped before that entry, so a scan continued after it
// examines the entry again. Entries here are 2 bytes: key and value "v".
func TestScanStopsBeforeTheByteBound(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	for i, k := range []string{"a", "b", "c", "d"} {
		putObject(t, e, uint64(i), k)
	}
	s := e.NewSnapshot()
	defer s.Close()
	for _, c := range []struct {
		maxBytes int
		keys     string
		last     string
		keep     func(uint64) bool
	}{
		{1, "a", "a", nil},  // the first entry alone, whatever its size
		{3, "a", "a", nil},  // a, then b would make 4
		{4, "ab", "b", nil}, // exactly the bound
		{5, "ab", "b", nil},
		{3, "b", "c", func(tok uint64) bool { return tok%2 == 1 }}, // c is skipped, d would make 4
	} {
		out, err := s.Scan(ScanOptions{Keep: c.keep, Limit: 10, MaxBytes: c.maxBytes, MaxExamined: 100, Values: true})
		must(t, err)
		keys := ""
		size := 0
		for _, en := range out.Entries {
			keys += string(en.Key)
			size += len(en.SortKey) + len(en.Value)
		}
		if keys != c.keys || !out.More || string(out.Last) != c.last {
			t.Fatalf("MaxBytes %d: entries %q more %v last %q, want %q, more, last %q", c.maxBytes, keys, out.More, out.Last, c.keys, c.last)
		}
		if len(out.Entries) > 1 && size > c.maxBytes {
			t.Fatalf("MaxBytes %d: %d bytes answered", c.maxBytes, size)
		}
	}
}

// The index terms a key-order scan answers with each object (Terms) count
// towards the byte bound, as values do: an object's terms can take 16 KiB
// where its value takes a byte.
func TestScanByteBoundCountsTerms(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	var terms []wire.IndexTerm
	for i := range 8 {
		terms = append(terms, wire.IndexTerm{Name: "t_bin", Term: bytes.Repeat([]byte{byte('a' + i)}, 1000)})
	}
	for i, k := range []string{"a", "b", "c", "d"} {
		putObject(t, e, uint64(i), k, terms...)
	}
	s := e.NewSnapshot()
	defer s.Close()
	out, err := s.Scan(ScanOptions{Limit: 10, MaxBytes: 10000, MaxExamined: 100, Values: true, Terms: true})
	must(t, err)
	size := 0
	for _, en := range out.Entries {
		size += len(en.SortKey) + len(en.Value)
		for _, tm := range en.Terms {
			size += len(tm.Name) + len(tm.Term)
		}
	}
	if len(out.Entries) != 1 || !out.More || string(out.Last) != "a" {
		t.Fatalf("%d entries (%d bytes with their terms), more %v, last %q; want the first alone, more, last \"a\"", len(out.Entries), size, out.More, out.Last)
	}
}
