package raftlog

import (
	"bytes"
	"math/rand"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// The cache must answer exactly what the engine holds: a log that has seen
// random appends, suffix overwrites and truncations answers Term and
// Entries as a log reopened from the engine (with nothing cached) does.
func TestEntryCacheMatchesEngine(t *testing.T) {
	seed := rand.Int63()
	rng := rand.New(rand.NewSource(seed))
	eng, l := openTest(t)
	term := uint64(InitTerm)
	for step := 0; step < 400; step++ {
		first, last := l.Bounds()
		switch op := rng.Intn(10); {
		case op < 6: // append after the end
			n := uint64(1 + rng.Intn(40))
			persist(t, eng, l, raftpb.HardState{}, ents(term, last+1, last+n))
		case op < 8 && last >= first: // a new leader overwrites a suffix
			term++
			from := first + uint64(rng.Int63n(int64(last-first+1)))
			persist(t, eng, l, raftpb.HardState{}, ents(term, from, from+uint64(rng.Intn(5))))
		case last > first: // truncate a prefix
			upTo := first + uint64(rng.Int63n(int64(last-first)))
			b := eng.NewBatch()
			hook, err := l.StageTruncate(b, upTo)
			if err != nil {
				t.Fatal(err)
			}
			if hook == nil {
				b.Close()
				continue
			}
			if err := b.Commit(true); err != nil {
				t.Fatal(err)
			}
			hook()
		}
		fresh, _, err := Open(eng, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, last = l.Bounds()
		for i := first; i <= last; i++ {
			a, errA := l.Term(i)
			b, errB := fresh.Term(i)
			if a != b || errA != errB {
				t.Fatalf("seed %d step %d: Term(%d) cached %d %v, engine %d %v", seed, step, i, a, errA, b, errB)
			}
		}
		if last < first {
			continue
		}
		lo := first + uint64(rng.Int63n(int64(last-first+1)))
		hi := lo + 1 + uint64(rng.Int63n(int64(last-lo+1)))
		maxSize := uint64(rng.Intn(400))
		a, errA := l.Entries(lo, hi, maxSize)
		b, errB := fresh.Entries(lo, hi, maxSize)
		if errA != errB || len(a) != len(b) {
			t.Fatalf("seed %d step %d: Entries(%d, %d, %d): %d %v vs %d %v", seed, step, lo, hi, maxSize, len(a), errA, len(b), errB)
		}
		for i := range a {
			if a[i].Index != b[i].Index || a[i].Term != b[i].Term || !bytes.Equal(a[i].Data, b[i].Data) {
				t.Fatalf("seed %d step %d: entry %d differs: %+v vs %+v", seed, step, i, a[i], b[i])
			}
		}
		// raft may append to what Entries returned: that must not
		// reach the cache.
		_ = append(a, raftpb.Entry{Index: 999999, Term: 999999})
	}
}

func TestEntryCacheBounded(t *testing.T) {
	var c entryCache
	big := make([]byte, 64<<10)
	for i := uint64(1); i <= 5000; i++ {
		c.append([]raftpb.Entry{{Index: i, Term: 1, Data: big[:int(i%2)*len(big)]}})
		if len(c.ents) > cacheMaxEntries || c.bytes > cacheMaxBytes || c.bytes != sizeOf(c.ents) {
			t.Fatalf("after %d: %d entries, %d bytes (counted %d)", i, len(c.ents), c.bytes, sizeOf(c.ents))
		}
		if got := c.ents[len(c.ents)-1].Index; got != i {
			t.Fatalf("last cached %d, want %d", got, i)
		}
	}
}
