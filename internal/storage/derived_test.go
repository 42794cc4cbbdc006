package storage

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// keyOrder lists the keys of the key-order index.
func keyOrder(t *testing.T, e *Engine) []string {
	t.Helper()
	it, err := e.NewIter(KeyOrderPrefix(), PrefixEnd(KeyOrderPrefix()))
	must(t, err)
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key()[1:]))
	}
	return out
}

// putObject writes an object and its derived entries, as apply does.
func putObject(t *testing.T, e *Engine, tok uint64, k string, terms ...wire.IndexTerm) {
	b := e.NewBatch()
	b.Set(DataKey(tok, []byte(k)), EncodeValueMeta(1, terms, []byte("v")))
	DerivedWrites(tok, []byte(k), nil, false, terms, false, b.Delete, b.Set)
	must(t, b.Commit(true))
}

// A snapshot's ingestion replaces the range's derived entries with those
// of the new data; other ranges keep theirs.
func TestIngestDerived(t *testing.T) {
	fs := NewCrashableFS()
	e, err := Open("db", Options{CacheSize: 1 << 20, FS: fs.FS()})
	must(t, err)
	x := wire.IndexTerm{Name: "x_bin", Term: []byte("1")}
	putObject(t, e, 10, "old", x)
	putObject(t, e, 500, "other", x)
	w, err := e.NewSSTWriter(filepath.Join(e.StagingDir(), "1.sst"))
	must(t, err)
	lo, hi := DataSpan(0, 100)
	must(t, w.DeleteRange(lo, hi))
	must(t, w.Set(DataKey(20, []byte("new")), EncodeValueMeta(3, []wire.IndexTerm{x}, []byte("v"))))
	must(t, w.Finish())
	// A crash right after the ingestion (before the derived entries are
	// written) is repaired at the next open.
	must(t, e.setMarker(0, 100))
	must(t, e.Ingest([]string{w.Path()}))
	crashed := fs.CrashClone(0, nil)
	must(t, e.Close())
	e2, err := Open("db", Options{CacheSize: 1 << 20, FS: crashed.FS()})
	must(t, err)
	if got := keyOrder(t, e2); !slices.Equal(got, []string{"new", "other"}) {
		t.Fatalf("after recovery the key order holds %q, want [new other]", got)
	}
	must(t, e2.Close())

	// The same through IngestDerived, without a crash.
	e3, err := Open("db", Options{CacheSize: 1 << 20, FS: fs.FS()})
	must(t, err)
	defer e3.Close()
	w, err = e3.NewSSTWriter(filepath.Join(e3.StagingDir(), "2.sst"))
	must(t, err)
	must(t, w.DeleteRange(lo, hi))
	must(t, w.Set(DataKey(30, []byte("newer")), EncodeValueMeta(4, nil, []byte("v"))))
	must(t, w.Finish())
	must(t, e3.IngestDerived([]string{w.Path()}, 0, 100))
	if got := keyOrder(t, e3); !slices.Equal(got, []string{"newer", "other"}) {
		t.Fatalf("key order %q, want [newer other]", got)
	}
	s := e3.NewSnapshot()
	defer s.Close()
	out, err := s.Scan(ScanOptions{Index: "x_bin", Limit: 10, MaxBytes: 1 << 20, MaxExamined: 100, Values: true})
	must(t, err)
	if len(out.Entries) != 1 || string(out.Entries[0].Key) != "other" || string(out.Entries[0].Value) != "v" {
		t.Fatalf("index x_bin holds %+v, want only other", out.Entries)
	}
}

// Scan keeps the entries its filter wants and stops at its bounds,
// reporting the last key it examined.
func TestScanBounds(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	for i, k := range []string{"a", "b", "c", "d", "e", "f"} {
		putObject(t, e, uint64(i), k)
	}
	s := e.NewSnapshot()
	defer s.Close()
	even := func(tok uint64) bool { return tok%2 == 0 }
	out, err := s.Scan(ScanOptions{After: []byte("a"), Keep: even, Limit: 2, MaxBytes: 1 << 20, MaxExamined: 100})
	must(t, err)
	if len(out.Entries) != 2 || string(out.Entries[0].Key) != "c" || string(out.Entries[1].Key) != "e" || !out.More || string(out.Last) != "e" {
		t.Fatalf("got %+v more %v last %q", out.Entries, out.More, out.Last)
	}
	out, err = s.Scan(ScanOptions{From: []byte("b"), To: []byte("e"), Limit: 10, MaxBytes: 1 << 20, MaxExamined: 2})
	must(t, err)
	if len(out.Entries) != 2 || !out.More || string(out.Last) != "c" {
		t.Fatalf("work bound: got %+v more %v last %q", out.Entries, out.More, out.Last)
	}
	out, err = s.Scan(ScanOptions{From: []byte("b"), To: []byte("e"), Limit: 10, MaxBytes: 1, MaxExamined: 100, Values: true})
	must(t, err)
	if len(out.Entries) != 1 || !out.More {
		t.Fatalf("byte bound: got %+v more %v", out.Entries, out.More)
	}
	out, err = s.Scan(ScanOptions{From: []byte("b"), To: []byte("e"), Limit: 10, MaxBytes: 1 << 20, MaxExamined: 100})
	must(t, err)
	if len(out.Entries) != 3 || out.More {
		t.Fatalf("whole range: got %+v more %v", out.Entries, out.More)
	}
}

// A data dir written before the derived indexes existed gets them, whole,
// the first time it opens.
func TestDerivedBuiltForOldData(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{CacheSize: 1 << 20})
	must(t, err)
	b := e.NewBatch()
	b.Set(DataKey(7, []byte("old")), EncodeValue(1, []byte("v")))
	b.Delete(derivedVersionKey()) // as an older Cairn left it
	must(t, b.Commit(true))
	must(t, e.Close())
	e, err = Open(dir, Options{CacheSize: 1 << 20})
	must(t, err)
	defer e.Close()
	if got := keyOrder(t, e); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("key order after the upgrade: %q", got)
	}
}
