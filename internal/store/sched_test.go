package store

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSchedQueuesEachShardOnce(t *testing.T) {
	s := newSched([]uint64{1, 2})
	for i := 0; i < 10; i++ {
		s.enqueue(1)
	}
	s.enqueue(2)
	s.enqueue(99) // unknown shards are ignored
	if n := len(s.queue); n != 2 {
		t.Fatalf("queue holds %d ids, want 2", n)
	}
}

func TestSchedRequeuesWorkArrivingDuringProcessing(t *testing.T) {
	s := newSched([]uint64{1})
	s.enqueue(1)
	id := <-s.queue
	s.begin(id)
	s.enqueue(1) // arrives while a worker processes shard 1
	if len(s.queue) != 0 {
		t.Fatal("shard queued twice while being processed")
	}
	s.done(id)
	if len(s.queue) != 1 {
		t.Fatal("work that arrived during processing was lost")
	}
	id = <-s.queue
	s.begin(id)
	s.done(id)
	if len(s.queue) != 0 {
		t.Fatal("idle shard requeued")
	}
}

// Many producers and workers: every enqueue is followed by at least one
// processing that starts after it, and no shard is processed concurrently.
func TestSchedConcurrent(t *testing.T) {
	ids := []uint64{1, 2, 3, 4}
	s := newSched(ids)
	var busy [5]atomic.Int32
	var processed atomic.Int64
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := 0; w < 4; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case id := <-s.queue:
					s.begin(id)
					if busy[id].Add(1) != 1 {
						t.Errorf("shard %d processed concurrently", id)
					}
					processed.Add(1)
					busy[id].Add(-1)
					s.done(id)
				case <-stop:
					return
				}
			}
		}()
	}
	var producers sync.WaitGroup
	for p := 0; p < 4; p++ {
		producers.Add(1)
		go func(p int) {
			defer producers.Done()
			for i := 0; i < 2000; i++ {
				s.enqueue(ids[(i+p)%len(ids)])
			}
		}(p)
	}
	producers.Wait()
	// Drain: all shards must come back to idle.
	for {
		idle := true
		for _, id := range ids {
			if s.state[id].Load() != stIdle {
				idle = false
			}
		}
		if idle {
			break
		}
		runtime.Gosched()
	}
	close(stop)
	workers.Wait()
	if processed.Load() == 0 {
		t.Fatal("nothing processed")
	}
}
