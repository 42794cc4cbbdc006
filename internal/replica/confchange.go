package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Create makes a new, empty replica of cfg.Desc's shard on this node (a
// replica being added by a move) and opens it. It holds no data and no
// log and is in no configuration until the leader's snapshot arrives; it
// persists cfg.Desc as its descriptor until then. It fails if the engine
// holds state for the shard already. A tombstone of an earlier local
// replica of the shard (the caller decided the creation may replace it)
// is deleted in the same synced batch as the new state is written, so a
// crash leaves one or the other, never neither.
func Create(cfg Config) (*Replica, error) {
	ok, err := raftlog.Exists(cfg.Engine, cfg.Desc.ID)
	if err != nil {
		return nil, err
	}
	if ok {
		return nil, fmt.Errorf("replica: shard %d has state already", cfg.Desc.ID)
	}
	err = raftlog.CreateEmpty(cfg.Engine, cfg.Desc.ID, func(b *storage.Batch) {
		b.Delete(storage.TombstoneKey(cfg.Desc.ID))
		b.Set(storage.DescriptorKey(cfg.Desc.ID), cfg.Desc.Marshal())
	})
	if err != nil {
		return nil, err
	}
	return Open(cfg, false)
}

// ErrStaleEpoch: a conf change was decided on a descriptor that is no
// longer the replica's (another change applied in between).
var ErrStaleEpoch = errors.New("replica: conf change decided on a stale descriptor")

// ProposeConfChange proposes a membership change of the shard, and
// returns once raft has taken it into its log (not once it applies: watch
// DescChanged and Status for that). Only the leader accepts it; others
// return a *NotLeaderError. With atEpoch > 0 it is proposed only if the
// replica's applied descriptor is still at that epoch (ErrStaleEpoch
// otherwise): a change decided on one configuration never lands on
// another. Raft itself refuses a change while an earlier one is not
// applied yet (it logs an empty entry instead), so callers decide each
// step from the applied configuration and retry.
func (r *Replica) ProposeConfChange(ctx context.Context, cc raftpb.ConfChangeV2, atEpoch uint64) error {
	done := make(chan error, 1)
	r.report(func(rn *raft.RawNode) {
		st := rn.BasicStatus()
		if st.RaftState != raft.StateLeader {
			done <- &NotLeaderError{Leader: st.Lead}
			return
		}
		if atEpoch != 0 && r.Desc().Epoch != atEpoch {
			done <- ErrStaleEpoch
			return
		}
		done <- rn.ProposeConfChange(cc)
	})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LastIndex is the last index of the replica's log.
func (r *Replica) LastIndex() uint64 {
	_, last := r.log.Bounds()
	return last
}
