package storage

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// fillAndRead writes n values of size bytes under distinct keys, flushes
// them into sstables and reads them all back, so their blocks enter the
// block cache.
func fillAndRead(t *testing.T, e *Engine, n, size int) {
	t.Helper()
	// Random values, so that blocks do not compress to nothing.
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, size)
	for i := 0; i < n; i += 1000 {
		b := e.NewBatch()
		for j := i; j < min(i+1000, n); j++ {
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			b.Set([]byte(fmt.Sprintf("k%08d", j)), val)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < n; j++ {
		if _, err := e.Get([]byte(fmt.Sprintf("k%08d", j))); err != nil {
			t.Fatalf("read k%08d: %v", j, err)
		}
	}
}

func TestSetCacheBudgetEvictsAndRestores(t *testing.T) {
	const size = 64 << 20
	// Values stay inline so that reading them fills the block cache;
	// small memtables, because Pebble reserves their memory from the cache.
	e, err := Open(t.TempDir(), Options{CacheSize: size, MemTableSize: 1 << 20, ValueSeparation: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	fillAndRead(t, e, 40000, 1024) // about 40 MiB of data blocks
	if got := e.CacheSize(); got < 24<<20 {
		t.Fatalf("cache holds %d bytes after reading 40 MiB, want at least 24 MiB", got)
	}
	if got := e.SetCacheBudget(16 << 20); got != 16<<20 {
		t.Fatalf("budget %d, want %d", got, 16<<20)
	}
	if got := e.CacheSize(); got > 16<<20 {
		t.Fatalf("cache holds %d bytes under a 16 MiB budget", got)
	}
	// Reading everything again cannot grow it past the budget.
	fillAndRead(t, e, 40000, 1024)
	if got := e.CacheSize(); got > 16<<20 {
		t.Fatalf("cache grew to %d bytes under a 16 MiB budget", got)
	}
	// Below the floor and above the opened size are clamped.
	if got := e.SetCacheBudget(1); got != MinCacheBudget {
		t.Fatalf("budget %d for 1 byte, want the floor %d", got, MinCacheBudget)
	}
	if got := e.SetCacheBudget(1 << 40); got != size {
		t.Fatalf("budget %d for 1 TiB, want the opened size %d", got, size)
	}
	if got := e.CacheBudget(); got != size {
		t.Fatalf("CacheBudget %d, want %d", got, size)
	}
	fillAndRead(t, e, 40000, 1024)
	if got := e.CacheSize(); got < 24<<20 {
		t.Fatalf("cache holds %d bytes after the budget was lifted, want at least 24 MiB", got)
	}
}
