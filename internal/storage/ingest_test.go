package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An ingested sstable's range deletion removes what the engine held, not
// the keys of the same ingestion; adjacent files (one ending where the next
// starts) ingest together.
func TestIngestReplacesRange(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	b.Set([]byte("b1"), []byte("old"))
	b.Set([]byte("b2"), []byte("old"))
	b.Set([]byte("c1"), []byte("old"))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	w1, err := e.NewSSTWriter(filepath.Join(e.StagingDir(), "1.sst"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, w1.DeleteRange([]byte("b"), []byte("c")))
	must(t, w1.Set([]byte("b2"), []byte("new")))
	must(t, w1.Finish())
	w2, err := e.NewSSTWriter(filepath.Join(e.StagingDir(), "2.sst"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, w2.Set([]byte("c"), []byte("new")))
	must(t, w2.Finish())
	must(t, e.Ingest([]string{w1.Path(), w2.Path()}))
	if _, err := e.Get([]byte("b1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b1 survived the range deletion: %v", err)
	}
	for k, want := range map[string]string{"b2": "new", "c": "new", "c1": "old"} {
		if v, err := e.Get([]byte(k)); err != nil || string(v) != want {
			t.Fatalf("%s = %q %v, want %q", k, v, err, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// On an in-memory filesystem the staging folder and the sstables live on
// that filesystem too (not on the operating system's), and a crash keeps
// an ingestion whole.
func TestIngestOnCrashableFS(t *testing.T) {
	fs := NewCrashableFS()
	opts := Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, FS: fs.FS()}
	dir := "/cairn-ingest-test-data"
	e, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the engine touched the operating system's filesystem at %s: %v", dir, err)
	}
	w, err := e.NewSSTWriter(filepath.Join(e.StagingDir(), "1.sst"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.Set([]byte("a"), []byte("ingested")))
	must(t, w.Finish())
	must(t, e.Ingest([]string{w.Path()}))
	_ = e.RemoveStaged(w.Path()) // Pebble may have moved it already
	if v, err := e.Get([]byte("a")); err != nil || string(v) != "ingested" {
		t.Fatalf("a = %q %v", v, err)
	}
	crashed := fs.CrashClone(0, nil)
	must(t, e.Close())
	opts.FS = crashed.FS()
	e2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if v, err := e2.Get([]byte("a")); err != nil || string(v) != "ingested" {
		t.Fatalf("after a crash a = %q %v", v, err)
	}
}
