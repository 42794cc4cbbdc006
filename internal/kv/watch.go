package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
)

// Shard histories. Every replica keeps its shard's recent changes, in log
// order, in the same batch as the writes (internal/statemachine's
// history); the etcd API's watches read them here, from this node's own
// replica of each shard they cover, so a watch needs no leader and goes
// on through elections. Revisions are the shard's log indexes.

// ErrCompacted: the history asked for is older than the shard keeps.
var ErrCompacted = replica.ErrCompacted

// CompactedError names the floor of the history that refused a read
// (events at or below it are gone).
type CompactedError = replica.CompactedError

// Event is one change of a shard's data: a put (Value set) or a delete,
// at log index Index, with the version and value it replaced.
type Event = replica.Event

// HistoryPage is a run of a shard's history: the changes in
// [from, Next) that this node's replica has applied.
type HistoryPage = replica.HistoryPage

// WatchShards returns the shards holding the keys of [key, end): the
// key's shard when end is nil, every shard otherwise (keys are placed by
// hash, so any range of more than one key can touch every shard).
func (c *Coordinator) WatchShards(key, end []byte) []uint64 {
	if end == nil {
		return []uint64{c.route(key).ID}
	}
	var ids []uint64
	for _, d := range c.shardViews() {
		ids = append(ids, d.ID)
	}
	return ids
}

// localReplica is this node's replica of shard id, if it holds one that
// has applied anything; otherwise an error naming where the shard lives.
func (c *Coordinator) localReplica(id uint64) (*replica.Replica, error) {
	r := c.cfg.Store.Replica(id)
	if r == nil || r.Removed() || r.Applied() == 0 {
		d := c.descriptor(id)
		return nil, fmt.Errorf("%w: shard %d (its replicas are on nodes %v)", ErrNoReplica, id, d.Replicas)
	}
	return r, nil
}

// ShardEvents reads shard id's history from index from on this node's
// replica, up to what it has applied and about maxBytes of keys and
// values (0: no bound). Errors: ErrNoReplica, a *CompactedError,
// ErrStopped.
func (c *Coordinator) ShardEvents(id, from uint64, maxBytes int) (HistoryPage, <-chan struct{}, error) {
	r, err := c.localReplica(id)
	if err != nil {
		return HistoryPage{}, nil, err
	}
	// The channel is taken before the read: an apply after the read
	// closes it.
	ch := r.AppliedChanged()
	page, err := r.Events(from, maxBytes)
	if errors.Is(err, replica.ErrStopped) {
		return HistoryPage{}, nil, ErrStopped
	}
	return page, ch, err
}

// readIndexAttempt bounds one read-index attempt: a request dropped on
// its way (an election) is asked again.
const readIndexAttempt = time.Second

// ShardRevision returns shard id's current revision, linearizably: the
// read index of its leader, once this node's replica has applied it (so
// its history holds every change up to it). A follower asks its leader
// inside the Raft stream; through an election it waits and asks again
// until ctx ends (ErrTimeout), or until the replica has known no leader
// for an election timeout (ErrNoLeader).
func (c *Coordinator) ShardRevision(ctx context.Context, id uint64) (uint64, error) {
	r, err := c.localReplica(id)
	if err != nil {
		return 0, err
	}
	for {
		if err := c.leaderLost(id); err != nil {
			return 0, err
		}
		actx, cancel := context.WithTimeout(ctx, readIndexAttempt)
		idx, err := r.ReadIndexForward(actx)
		cancel()
		var nl *replica.NotLeaderError
		switch {
		case err == nil:
			return idx, nil
		case errors.Is(err, replica.ErrStopped):
			return 0, ErrStopped
		case errors.Is(err, replica.ErrOverloaded):
			return 0, fmt.Errorf("%w: %v", ErrOverloaded, err)
		case errors.As(err, &nl), errors.Is(err, context.DeadlineExceeded):
		default:
			return 0, err
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: no read index of shard %d: %v", ErrTimeout, id, err)
		}
	}
}

// LeaderClock is shard id's replicated clock (internal/statemachine) as
// this node's replica has applied it, when that replica leads the shard:
// the time the etcd API's lease expiry runs on. ok is false elsewhere.
func (c *Coordinator) LeaderClock(id uint64) (clock time.Duration, ok bool) {
	r := c.cfg.Store.Replica(id)
	if r == nil || r.Removed() {
		return 0, false
	}
	return r.LeaderClock()
}

// StampClock has this node's replica of shard id, if it leads the shard,
// propose an entry that moves the shard clock (see LeaderClock).
func (c *Coordinator) StampClock(id uint64) {
	if r := c.cfg.Store.Replica(id); r != nil && !r.Removed() {
		r.StampClock()
	}
}

// ShardClock is shard id's replicated clock as this node's replica has
// applied it, leader or not; ok is false without a replica.
func (c *Coordinator) ShardClock(id uint64) (clock time.Duration, ok bool) {
	r := c.cfg.Store.Replica(id)
	if r == nil || r.Removed() || r.Applied() == 0 {
		return 0, false
	}
	return r.ShardClock(), true
}
