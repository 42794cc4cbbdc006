package kv

import (
	"bytes"
	"encoding/binary"
	"github.com/cairn-db/cairn/internal/shard"
	"sync"
	"testing"
)

// Generated request ids are unique and ordered by their time part even
// when the clock stands still or goes back, and under concurrent writers.
func TestNewRequestIDOrderedAndUnique(t *testing.T) {
	m, err := shard.Bootstrap([]uint64{1}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{NodeID: 1, Replication: 1, Map: m})
	if err != nil {
		t.Fatal(err)
	}
	var prev []byte
	for i, now := range []int64{1000, 1000, 999, 5000, 4000, 5001} {
		id := c.newRequestID(now)
		if len(id) != 16 {
			t.Fatalf("id %d has %d bytes", i, len(id))
		}
		if prev != nil && bytes.Compare(id[:8], prev[:8]) <= 0 {
			t.Fatalf("id %d (time %d) not after the one before (time %d)", i,
				binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(prev[:8]))
		}
		prev = id
	}
	if got := binary.BigEndian.Uint64(prev[:8]); got != 5002 {
		t.Fatalf("last time part %d, want 5002 (5000, then 5001, then one past it)", got)
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				id := c.newRequestID(42)
				mu.Lock()
				if seen[string(id[:8])] {
					t.Errorf("time part %x given twice", id[:8])
				}
				seen[string(id[:8])] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
