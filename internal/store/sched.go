package store

import (
	"sync"
	"sync/atomic"
)

const (
	stIdle int32 = iota
	stQueued
	stProcessing
	stRequeue
)

// maxQueued bounds the shard ids queued at once: at most one entry per
// shard (shard ids fit in 16 bits, see shard.Bootstrap) plus the stale
// entry of a shard removed and created again while queued.
const maxQueued = 1<<17 + 1

// sched is a queue of shard ids in which each shard appears at most once
// and is processed by at most one worker at a time. Shards are added when
// a replica is created and removed when it is removed.
type sched struct {
	queue chan uint64
	mu    sync.RWMutex
	state map[uint64]*atomic.Int32
}

func newSched(ids []uint64) *sched {
	s := &sched{queue: make(chan uint64, maxQueued), state: map[uint64]*atomic.Int32{}}
	for _, id := range ids {
		s.add(id)
	}
	return s
}

// add makes id schedulable.
func (s *sched) add(id uint64) {
	s.mu.Lock()
	if s.state[id] == nil {
		s.state[id] = new(atomic.Int32)
	}
	s.mu.Unlock()
}

// remove forgets id; an entry still in the queue is skipped by workers.
func (s *sched) remove(id uint64) {
	s.mu.Lock()
	delete(s.state, id)
	s.mu.Unlock()
}

func (s *sched) get(id uint64) *atomic.Int32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state[id]
}

// enqueue marks id as needing work.
func (s *sched) enqueue(id uint64) {
	st := s.get(id)
	if st == nil {
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

// begin is called by a worker after popping id; false: id was removed.
func (s *sched) begin(id uint64) bool {
	st := s.get(id)
	if st == nil {
		return false
	}
	st.Store(stProcessing)
	return true
}

// done is called after processing; it requeues id if work arrived meanwhile.
func (s *sched) done(id uint64) {
	st := s.get(id)
	if st == nil || st.CompareAndSwap(stProcessing, stIdle) {
		return
	}
	st.Store(stQueued)
	s.queue <- id
}

// stateName names id's scheduling state, for diagnostics ("removed": not
// schedulable).
func (s *sched) stateName(id uint64) string {
	st := s.get(id)
	if st == nil {
		return "removed"
	}
	switch st.Load() {
	case stIdle:
		return "idle"
	case stQueued:
		return "queued"
	case stProcessing:
		return "processing"
	default:
		return "processing, requeued"
	}
}
