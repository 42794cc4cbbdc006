package store

import "sync/atomic"

const (
	stIdle int32 = iota
	stQueued
	stProcessing
	stRequeue
)

// sched is a queue of shard ids in which each shard appears at most once
// and is processed by at most one worker at a time.
type sched struct {
	queue chan uint64
	state map[uint64]*atomic.Int32 // fixed after construction
}

func newSched(ids []uint64) *sched {
	s := &sched{queue: make(chan uint64, len(ids)+1), state: map[uint64]*atomic.Int32{}}
	for _, id := range ids {
		s.state[id] = new(atomic.Int32)
	}
	return s
}

// enqueue marks id as needing work.
func (s *sched) enqueue(id uint64) {
	st, ok := s.state[id]
	if !ok {
		return
	}
	for {
		switch cur := st.Load(); cur {
		case stIdle:
			if st.CompareAndSwap(stIdle, stQueued) {
				s.queue <- id // never blocks: each id is queued at most once
				return
			}
		case stProcessing:
			if st.CompareAndSwap(stProcessing, stRequeue) {
				return
			}
		default: // queued or requeue: work already pending
			return
		}
	}
}

// begin is called by a worker after popping id.
func (s *sched) begin(id uint64) { s.state[id].Store(stProcessing) }

// done is called after processing; it requeues id if work arrived meanwhile.
func (s *sched) done(id uint64) {
	st := s.state[id]
	if st.CompareAndSwap(stProcessing, stIdle) {
		return
	}
	st.Store(stQueued)
	s.queue <- id
}
