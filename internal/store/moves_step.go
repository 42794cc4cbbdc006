package store

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// maxLearnerLag: a learner is promoted once its log is within this many
// entries of the leader's.
const maxLearnerLag = 128

// step is what runChange does next.
type step struct {
	done     bool
	transfer uint64 // hand leadership to this voter
	create   uint64 // make sure this node has an (empty) replica
	cc       *raftpb.ConfChangeV2
}

// nextStep decides the next step of c on the leader self, from raft's
// status (the applied configuration and the followers' progress) and the
// leader's last log index. It is a pure function of that state, which is
// what makes a change resumable from wherever it stopped.
func nextStep(c MemberChange, self uint64, st raft.Status, last uint64) (step, error) {
	cfg := st.Config
	if len(cfg.Voters[1]) > 0 {
		// Joint: raft leaves it by itself when it was entered with auto
		// leave (as Cairn does); one entered explicitly is left here.
		if cfg.AutoLeave {
			return step{}, nil
		}
		return step{cc: &raftpb.ConfChangeV2{}}, nil
	}
	voter := func(id uint64) bool { _, ok := cfg.Voters[0][id]; return ok }
	learner := func(id uint64) bool { _, ok := cfg.Learners[id]; return ok }
	member := func(id uint64) bool { return voter(id) || learner(id) }
	caughtUp := func(id uint64) bool {
		pr, ok := st.Progress[id]
		return ok && pr.State == tracker.StateReplicate && pr.Match+maxLearnerLag >= last
	}
	// otherVoter is the most up-to-date voter other than self and skip.
	otherVoter := func(skip uint64) uint64 {
		var best, match uint64
		for id := range cfg.Voters[0] {
			if pr, ok := st.Progress[id]; id != self && id != skip && ok && (best == 0 || pr.Match > match) {
				best, match = id, pr.Match
			}
		}
		return best
	}
	add := func(id uint64, typ raftpb.ConfChangeType) *raftpb.ConfChangeV2 {
		return &raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: id}}}
	}
	switch c.Kind {
	case ChangeMove:
		from, to := c.From, c.To
		switch {
		case !member(from) && voter(to):
			return step{done: true}, nil
		case !member(from) && !learner(to):
			return step{}, fmt.Errorf("%w: node %d holds no replica of shard %d", ErrBadChange, from, c.Shard)
		case from == self && voter(from):
			if o := otherVoter(from); o != 0 {
				return step{transfer: o}, nil
			}
			return step{}, fmt.Errorf("%w: node %d is the only voter of shard %d", ErrBadChange, from, c.Shard)
		case !member(to):
			return step{create: to, cc: add(to, raftpb.ConfChangeAddLearnerNode)}, nil
		case learner(to) && !caughtUp(to):
			return step{create: to}, nil // wait (and make sure it exists)
		case learner(to) && member(from):
			// Promote and remove in one joint step, left automatically.
			return step{cc: &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointImplicit,
				Changes: []raftpb.ConfChangeSingle{
					{Type: raftpb.ConfChangeAddNode, NodeID: to},
					{Type: raftpb.ConfChangeRemoveNode, NodeID: from},
				}}}, nil
		case learner(to):
			return step{cc: add(to, raftpb.ConfChangeAddNode)}, nil
		default: // to is a voter already, from still a member
			return step{cc: add(from, raftpb.ConfChangeRemoveNode)}, nil
		}
	case ChangeAdd:
		to := c.To
		switch {
		case voter(to) && c.Learner:
			return step{}, fmt.Errorf("%w: node %d is a voter of shard %d", ErrBadChange, to, c.Shard)
		case voter(to), learner(to) && c.Learner && caughtUp(to):
			return step{done: true}, nil
		case learner(to) && c.Learner:
			// A read replica's learner: done once it has caught up, so
			// the balancer's transfer limit covers its snapshot.
			return step{create: to}, nil
		case !member(to):
			return step{create: to, cc: add(to, raftpb.ConfChangeAddLearnerNode)}, nil
		case !caughtUp(to):
			return step{create: to}, nil
		default:
			return step{cc: add(to, raftpb.ConfChangeAddNode)}, nil
		}
	case ChangeRemove:
		node := c.From
		switch {
		case !member(node):
			return step{done: true}, nil
		case learner(node):
			return step{cc: add(node, raftpb.ConfChangeRemoveNode)}, nil
		case len(cfg.Voters[0]) == 1:
			return step{}, fmt.Errorf("%w: node %d is the only voter of shard %d", ErrBadChange, node, c.Shard)
		case node == self:
			if o := otherVoter(node); o != 0 {
				return step{transfer: o}, nil
			}
			return step{}, fmt.Errorf("%w: no other voter to hand shard %d to", ErrBadChange, c.Shard)
		default:
			return step{cc: add(node, raftpb.ConfChangeRemoveNode)}, nil
		}
	}
	return step{}, fmt.Errorf("%w: kind %d", ErrBadChange, c.Kind)
}

func describeCC(cc raftpb.ConfChangeV2) string {
	if cc.LeaveJoint() {
		return "leave joint"
	}
	return raftpb.ConfChangesToString(cc.Changes)
}
