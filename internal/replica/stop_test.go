package replica

import (
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/storage"
)

// A round that passed Stage's check of the stopped flag just before Stop
// ran must not go on once it gets the lock: the store deletes a removed
// replica's state right after Stop returns, and a round that persisted
// and applied after that would write raft state (and data) back under
// the tombstone.
func TestNoRoundAfterStop(t *testing.T) {
	r := singleReplica(t)
	eng := r.cfg.Engine
	r.mu.Lock() // a round in progress: Stage waits for it, past its check
	ran := make(chan bool, 1)
	go func() {
		b := eng.NewBatch()
		rr, sync := r.Stage(b)
		if rr == nil {
			b.Close()
			ran <- false
			return
		}
		if err := b.Commit(sync); err != nil {
			panic(err)
		}
		r.Finish(rr)
		ran <- true
	}()
	time.Sleep(50 * time.Millisecond)
	r.StampClock() // work for that round: an entry to persist
	// Stop, from start to end, while Stage waits: Stop sets the flag, then
	// takes and releases the lock (held here). Then the store deletes the
	// replica's state.
	r.stopped.Store(true)
	ls, le := storage.ShardLocalSpan(r.id)
	b := eng.NewBatch()
	b.DeleteRange(ls, le)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	r.mu.Unlock()
	if <-ran {
		t.Error("a round ran after Stop")
	}
	it, err := eng.NewIter(ls, le)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Errorf("raft state of the stopped replica written again after its deletion: %x", it.Key())
	}
}
