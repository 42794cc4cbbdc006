package replica

import (
	"time"

	"github.com/cairn-db/cairn/internal/statemachine"
)

// Event is one change of the shard's data, as its history records it
// (see internal/statemachine/history.go).
type Event = statemachine.Event

// HistoryPage is a run of the shard's history.
type HistoryPage = statemachine.HistoryPage

// CompactedError: the history no longer holds the events asked for.
type CompactedError = statemachine.CompactedError

// ErrCompacted is wrapped by a *CompactedError.
var ErrCompacted = statemachine.ErrCompacted

// Events reads the shard's history from index from up to the replica's
// applied index, stopping after about maxBytes of keys and values (0: no
// bound). The page holds every change in [from, page.Next) that this
// replica has applied; page.Next - 1 is where a reader's view of the
// shard stands. Safe for concurrent use.
func (r *Replica) Events(from uint64, maxBytes int) (HistoryPage, error) {
	if r.stopped.Load() {
		return HistoryPage{}, ErrStopped
	}
	return r.sm.Events(from, r.applied.Load(), maxBytes)
}

// AppliedChanged returns a channel closed when the applied index next
// moves (or a snapshot is installed): a history reader waits on it.
func (r *Replica) AppliedChanged() <-chan struct{} {
	for {
		if p := r.appliedCh.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if r.appliedCh.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// notifyApplied wakes the waiters of AppliedChanged (after the applied
// index moved). Nothing to do, and no allocation, when none waits.
func (r *Replica) notifyApplied() {
	if p := r.appliedCh.Swap(nil); p != nil {
		close(*p)
	}
}

// StampClock has a leader propose an entry that only stamps the shard
// clock, at its next round: a user of the clock (the etcd API's lease
// expiry) keeps it moving while it needs it, writes or not. A follower
// does nothing.
func (r *Replica) StampClock() {
	if r.IsLeader() {
		r.stampAsked.Store(true)
		r.cfg.Enqueue(r.id)
	}
}

// LeaderClock is the shard clock as this replica has applied it, and
// whether it leads the shard.
func (r *Replica) LeaderClock() (time.Duration, bool) {
	if !r.IsLeader() {
		return 0, false
	}
	return r.ShardClock(), true
}
