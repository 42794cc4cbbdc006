package store

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchedNoLostWakeup hammers the scheduler's state machine with
// producers (which, like Step and Tick, add work and then enqueue) and
// workers (which, like the store's, begin, drain what is there and finish):
// once the producers stop and the queue goes quiet, every id must have had
// a round that saw all the work added to it. A lost wakeup leaves an id
// whose last additions no round drained.
func TestSchedNoLostWakeup(t *testing.T) {
	const ids, producers, workers, perProducer = 8, 8, 4, 20000
	s := newSched(nil)
	var added, drained [ids + 1]atomic.Int64
	for id := uint64(1); id <= ids; id++ {
		s.add(id)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []uint64
			for {
				select {
				case id := <-s.queue:
					batch = append(batch[:0], id)
				case <-stop:
					return
				}
			more:
				for len(batch) < 4 {
					select {
					case id := <-s.queue:
						batch = append(batch, id)
					default:
						break more
					}
				}
				for _, id := range batch {
					if s.begin(id) {
						drained[id].Store(added[id].Load())
						// A round takes a while: work that arrives
						// meanwhile must bring the shard back.
						runtime.Gosched()
					}
				}
				for _, id := range batch {
					s.done(id)
				}
			}
		}()
	}
	var pw sync.WaitGroup
	for p := 0; p < producers; p++ {
		pw.Add(1)
		go func(p int) {
			defer pw.Done()
			for i := 0; i < perProducer; i++ {
				id := uint64((p+i)%ids) + 1
				added[id].Add(1)
				s.enqueue(id)
			}
		}(p)
	}
	pw.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for id := uint64(1); id <= ids; id++ {
		for drained[id].Load() != added[id].Load() {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("shard %d: %d added, last round drained %d, state %s: a wakeup was lost",
					id, added[id].Load(), drained[id].Load(), s.stateName(id))
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
}
