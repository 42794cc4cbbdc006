package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// A split (docs/split.md) is one normal entry in the shard's log
// (wire.Split). Every replica applies it at the same index I, in one
// batch of its own: the shard's descriptor becomes the lower half
// (epoch + 1) and the new shard's initial state is written — its raft
// log empty after (I, term of I) with the shard's conf state, its
// descriptor (the upper half, epoch + 1), a copy of the dedup table and
// shard clock — with the shard's applied index I. After a crash either
// all of it is there or none (and the log replays the entry). No data
// moves: the upper half's keys are where they were, now read and written
// by the new shard's replica.

// ErrCannotSplit: the shard cannot split now (a range too narrow, a
// joint configuration, a descriptor that changed under the request).
var ErrCannotSplit = errors.New("replica: shard cannot split")

// checkSplit reports why s cannot apply on descriptor d and conf state
// cs, nil if it can. The same on every replica (same entries, same
// state).
func checkSplit(d shard.Descriptor, cs raftpb.ConfState, s wire.Split) error {
	mid, ok := d.SplitPoint()
	switch {
	case s.Shard != d.ID || s.Epoch != d.Epoch || s.Start != d.Start || s.End != d.End:
		return fmt.Errorf("decided on shard %d epoch %d [%#x,%#x), the replica is shard %d epoch %d [%#x,%#x)",
			s.Shard, s.Epoch, s.Start, s.End, d.ID, d.Epoch, d.Start, d.End)
	case !ok || s.Mid != mid || s.Child != mid:
		return fmt.Errorf("split point %#x (child %d) is not the range's midpoint", s.Mid, s.Child)
	case len(cs.VotersOutgoing) > 0 || len(cs.LearnersNext) > 0 || len(cs.Voters) == 0:
		return errors.New("the shard is in a joint configuration")
	}
	return nil
}

// applySplitLocked applies the split entry e (see above). A split that
// does not fit the applied descriptor is skipped, by every replica alike.
func (r *Replica) applySplitLocked(e *raftpb.Entry) {
	d := r.Desc()
	as := raftlog.AppliedState{Index: e.Index, Term: e.Term, ConfState: r.mu.cs}
	s, err := wire.DecodeSplit(e.Data)
	if err == nil {
		err = checkSplit(d, r.mu.cs, s)
	}
	eng := r.cfg.Engine
	b := eng.NewBatch()
	b.Set(storage.AppliedKey(r.id), as.Marshal())
	if err != nil {
		r.cfg.Logger.Warn("split skipped", "shard", r.id, "index", e.Index, "err", err)
		if err := b.Commit(false); err != nil {
			panic("replica: apply: " + err.Error())
		}
		r.mu.appliedT = e.Term
		r.applied.Store(e.Index)
		r.notifyApplied()
		return
	}
	lower, upper := d.Halves(s.Mid)
	b.Set(storage.DescriptorKey(r.id), lower.Marshal())
	// The new shard's state, unless this node holds some already (never
	// the case while the log is the only way to create it; kept as a
	// guard against overwriting a replica that went on from there).
	fresh, err := newShardState(eng, upper.ID)
	if err != nil {
		panic("replica: apply split: " + err.Error())
	}
	if fresh {
		raftlog.StageSplitChild(b, upper.ID, e.Index, e.Term, r.mu.cs)
		b.Set(storage.DescriptorKey(upper.ID), upper.Marshal())
		if _, err := statemachine.CopyDedup(eng, b, r.id, upper.ID); err != nil {
			panic("replica: apply split: " + err.Error())
		}
	}
	if err := b.Commit(false); err != nil {
		panic("replica: apply split: " + err.Error())
	}
	r.mu.appliedT = e.Term
	r.applied.Store(e.Index)
	r.notifyApplied()
	// The new replica first, so whoever sees the lower half finds it.
	if f := r.cfg.OnSplit; f != nil && fresh {
		f(upper, r.leader.Load() == r.cfg.NodeID)
	}
	r.setDesc(lower)
	r.cfg.Logger.Info("shard split", "shard", r.id, "index", e.Index, "epoch", lower.Epoch,
		"range", fmt.Sprintf("[%#x,%#x)", lower.Start, lower.End), "new_shard", upper.ID,
		"new_range", fmt.Sprintf("[%#x,%#x)", upper.Start, upper.End), "created", fresh)
}

// newShardState reports whether the engine holds neither state nor a
// tombstone of shard id.
func newShardState(eng *storage.Engine, id uint64) (bool, error) {
	has, err := raftlog.Exists(eng, id)
	if err != nil || has {
		return false, err
	}
	_, err = eng.Get(storage.TombstoneKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// ProposeSplit proposes to split the shard at the midpoint of its token
// range, and returns the new shard's id once raft has taken the entry
// into its log (not once it applies: watch DescChanged). Only the leader
// accepts it (others: a *NotLeaderError). With atEpoch > 0 it is proposed
// only if the applied descriptor is still at that epoch (ErrStaleEpoch).
// ErrCannotSplit when the range is too narrow or a membership change is
// in progress (a joint configuration).
func (r *Replica) ProposeSplit(ctx context.Context, atEpoch uint64) (uint64, error) {
	type answer struct {
		child uint64
		err   error
	}
	done := make(chan answer, 1)
	r.report(func(rn *raft.RawNode) {
		st := rn.BasicStatus()
		if st.RaftState != raft.StateLeader {
			done <- answer{err: &NotLeaderError{Leader: st.Lead}}
			return
		}
		d := r.Desc()
		if atEpoch != 0 && d.Epoch != atEpoch {
			done <- answer{err: ErrStaleEpoch}
			return
		}
		mid, ok := d.SplitPoint()
		if !ok {
			done <- answer{err: fmt.Errorf("%w: range [%#x,%#x) too narrow", ErrCannotSplit, d.Start, d.End)}
			return
		}
		s := wire.Split{Shard: d.ID, Epoch: d.Epoch, Start: d.Start, End: d.End, Mid: mid, Child: mid}
		if err := checkSplit(d, r.mu.cs, s); err != nil {
			done <- answer{err: fmt.Errorf("%w: %v", ErrCannotSplit, err)}
			return
		}
		done <- answer{child: mid, err: rn.Propose(s.Marshal())}
	})
	select {
	case a := <-done:
		return a.child, a.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
