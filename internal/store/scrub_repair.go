package store

import (
	"context"
	"fmt"
	"time"
)

// repairTimeout bounds one repair: the removal, the local deletion and
// the re-addition with its snapshot.
const repairTimeout = 10 * time.Minute

// repair replaces this node's replica of a shard, whose data a scrub
// found to differ from the majority's, by a snapshot from the leader.
//
// A voter cannot simply wipe its data and log and start again under the
// same raft id: the leader would still count the entries it acknowledged
// (its Match) towards commits, and ignore its rejections of appends below
// that Match as stale, so it would never be sent a snapshot; and a voter
// that lost its log can break the majority an entry was committed on. So
// the replica is first removed from the shard by a conf change (the
// remaining voters still hold a majority of the old configuration, so
// nothing committed is lost); once removed, this node deletes its data
// and raft state under a tombstone (as after any removal); then the node
// is added back (learner, a fresh raft progress at the leader, a snapshot
// streamed from the leader's pinned engine snapshot, promotion), creating
// an empty replica over the tombstone of the older epoch. The new
// replica's data comes from the leader, so it is verified.
func (s *Store) repair(shardID uint64) {
	defer func() {
		s.scrub.Lock()
		delete(s.scrub.repairing, shardID)
		s.scrub.Unlock()
	}()
	ctx, cancel := context.WithTimeout(s.ctx, repairTimeout)
	defer cancel()
	start := time.Now()
	err := s.replace(ctx, shardID)
	s.scrub.Lock()
	if err != nil {
		s.scrub.stats.RepairFailures++
	} else {
		s.scrub.stats.Repairs++
		if l, ok := s.scrub.last[shardID]; ok {
			l.Outcome, l.At = ScrubRepaired, time.Now()
			s.scrub.last[shardID] = l
		}
	}
	s.scrub.Unlock()
	if err != nil {
		s.cfg.Logger.Error("scrub: repairing a replica failed", "shard", shardID, "err", err)
		return
	}
	s.cfg.Logger.Info("scrub: replica repaired from a snapshot of the leader", "shard", shardID, "took", time.Since(start).Round(time.Millisecond))
}

// replace removes this node's replica of the shard, waits until its
// data is deleted here, and adds the node back.
func (s *Store) replace(ctx context.Context, shardID uint64) error {
	self := s.cfg.NodeID
	if err := s.RemoveReplica(ctx, shardID, self); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	// The local replica learns of its removal when it applies the conf
	// change — which it may never receive once the leader dropped it.
	// The descriptor the leader answered with (or this node's own, when
	// it applied the change) no longer lists this node: delete the
	// replica now rather than wait for the orphan collector.
	for {
		r := s.replica(shardID)
		if r == nil {
			break
		}
		if d, ok := s.Descriptor(shardID); ok && !d.HasReplica(self) {
			if err := s.removeLocal(d); err != nil {
				return fmt.Errorf("delete the local replica: %w", err)
			}
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the removal to apply: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := s.AddReplica(ctx, shardID, self, false); err != nil {
		return fmt.Errorf("add back: %w", err)
	}
	return nil
}
