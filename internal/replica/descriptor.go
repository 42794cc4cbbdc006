package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// The replica's descriptor is derived from its applied conf state: every
// conf change it applies (learner added, joint configuration entered or
// left, replica removed) writes the next descriptor, epoch plus one, under
// storage.DescriptorKey in the same batch as the applied state. Snapshots
// carry the record (it is one of the spans they stream), so a replica
// that catches up by snapshot learns the epoch with the data.

// nextDescriptor is old with the membership of cs and the epoch bumped.
// Replicas keeps old's order: a voter that left gives its place to a
// voter that joined (so a moved shard keeps its preferred-leader slot);
// in a joint configuration the incoming voters come first, then the
// outgoing ones.
func nextDescriptor(old shard.Descriptor, cs raftpb.ConfState) shard.Descriptor {
	d := shard.Descriptor{ID: old.ID, Start: old.Start, End: old.End, Epoch: old.Epoch + 1}
	d.Replicas = orderLike(old.Replicas, cs.Voters)
	for _, id := range orderLike(old.Replicas, cs.VotersOutgoing) {
		if !slices.Contains(d.Replicas, id) {
			d.Replicas = append(d.Replicas, id)
		}
	}
	for _, ids := range [][]uint64{cs.Learners, cs.LearnersNext} {
		for _, id := range ids {
			if !slices.Contains(d.Learners, id) && !slices.Contains(d.Replicas, id) {
				d.Learners = append(d.Learners, id)
			}
		}
	}
	slices.Sort(d.Learners)
	return d
}

// orderLike returns the members of set in old's order, each member of
// old missing from set replaced by a member of set missing from old
// (ascending), the rest appended.
func orderLike(old, set []uint64) []uint64 {
	var added []uint64
	for _, id := range set {
		if !slices.Contains(old, id) {
			added = append(added, id)
		}
	}
	slices.Sort(added)
	out := make([]uint64, 0, len(set))
	for _, id := range old {
		switch {
		case slices.Contains(set, id):
			out = append(out, id)
		case len(added) > 0:
			out, added = append(out, added[0]), added[1:]
		}
	}
	return append(out, added...)
}

// isMember reports whether node is in any part of cs.
func isMember(cs raftpb.ConfState, node uint64) bool {
	for _, ids := range [][]uint64{cs.Voters, cs.VotersOutgoing, cs.Learners, cs.LearnersNext} {
		if slices.Contains(ids, node) {
			return true
		}
	}
	return false
}

// isLeaving reports whether cs is a joint configuration that node leaves:
// a voter of the outgoing half, in no part of the incoming one.
func isLeaving(cs raftpb.ConfState, node uint64) bool {
	if !slices.Contains(cs.VotersOutgoing, node) {
		return false
	}
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.LearnersNext} {
		if slices.Contains(ids, node) {
			return false
		}
	}
	return true
}

// checkConfChange reports whether raft can apply cc on top of cs: raft
// panics applying a conf change its changer refuses (leaving a joint
// configuration that is not joint, entering one twice, removing every
// voter…). Every replica applies the same entries on the same conf state,
// so all of them skip a refused change alike.
func checkConfChange(cs raftpb.ConfState, index uint64, cc raftpb.ConfChangeV2) error {
	for _, c := range cc.Changes {
		if c.NodeID == 0 {
			return errors.New("conf change names node 0")
		}
		switch c.Type {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeRemoveNode, raftpb.ConfChangeAddLearnerNode:
		default:
			return fmt.Errorf("conf change type %v", c.Type)
		}
	}
	if cc.Transition > raftpb.ConfChangeTransitionJointExplicit {
		return fmt.Errorf("conf change transition %v", cc.Transition)
	}
	ch := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: index}
	cfg, prs, err := confchange.Restore(ch, cs)
	if err != nil {
		return err
	}
	ch.Tracker.Config, ch.Tracker.Progress = cfg, prs
	switch leave, joint := cc.LeaveJoint(), false; {
	case leave:
		_, _, err = ch.LeaveJoint()
	default:
		var auto bool
		if auto, joint = cc.EnterJoint(); joint {
			_, _, err = ch.EnterJoint(auto, cc.Changes...)
		} else {
			_, _, err = ch.Simple(cc.Changes...)
		}
	}
	return err
}

// loadDescriptor reads the persisted descriptor of shard, if any.
func loadDescriptor(g interface{ Get([]byte) ([]byte, error) }, shardID uint64) (shard.Descriptor, bool, error) {
	b, err := g.Get(storage.DescriptorKey(shardID))
	if errors.Is(err, storage.ErrNotFound) {
		return shard.Descriptor{}, false, nil
	}
	if err != nil {
		return shard.Descriptor{}, false, err
	}
	d, err := shard.UnmarshalDescriptor(b)
	if err != nil || d.ID != shardID {
		return shard.Descriptor{}, false, fmt.Errorf("%w: descriptor of shard %d: %v", storage.ErrCorrupt, shardID, err)
	}
	return d, true, nil
}

// StoredDescriptor reads the descriptor persisted for shardID (found
// false when none is).
func StoredDescriptor(eng *storage.Engine, shardID uint64) (shard.Descriptor, bool, error) {
	return loadDescriptor(eng, shardID)
}
