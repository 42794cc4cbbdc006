package storage

import (
	"sync"
	"testing"
)

// OnSync runs after every sync: a clone taken there holds each synced
// commit and none that follows it, so a test can stop a multi-step
// operation at every point a crash could.
func TestOnSyncSeesEachSyncedCommit(t *testing.T) {
	fs := NewCrashableFS()
	opts := Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, FS: fs.FS()}
	e, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var mu sync.Mutex
	var clones []*CrashableFS
	fs.OnSync(func() {
		mu.Lock()
		clones = append(clones, fs.CrashClone(0, nil))
		mu.Unlock()
	})
	for _, k := range []string{"a", "b"} {
		b := e.NewBatch()
		b.Set([]byte(k), []byte("v"))
		must(t, b.Commit(true))
	}
	fs.OnSync(nil)
	mu.Lock()
	defer mu.Unlock()
	// Each of a, b in the first clone taken after its commit, b not in
	// the clones taken before its own.
	seen := map[string]int{}
	for i, c := range clones {
		opts.FS = c.FS()
		e2, err := Open("/data", opts)
		if err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := e2.Get([]byte(k)); err == nil {
				if _, ok := seen[k]; !ok {
					seen[k] = i
				}
			}
		}
		must(t, e2.Close())
	}
	if len(seen) != 2 || seen["a"] >= seen["b"] {
		t.Fatalf("first clone holding each key: %v (of %d clones), want a before b", seen, len(clones))
	}
}
