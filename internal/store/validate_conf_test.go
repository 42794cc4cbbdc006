package store

import (
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
	"go.etcd.io/raft/v3/raftpb"
)

// Since replicas move, the peer check lets well-formed membership changes
// through: ConfChangeV2 entries in appends, and snapshots of a joint
// configuration (a move in progress) or with learners.
func TestWellFormedConfChangesPass(t *testing.T) {
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}, Learners: []uint64{4}, Epoch: 3}
	joint, _ := (&raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointImplicit, Changes: []raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddNode, NodeID: 4}, {Type: raftpb.ConfChangeRemoveNode, NodeID: 3}}}).Marshal()
	leave, _ := (&raftpb.ConfChangeV2{}).Marshal()
	learner, _ := (&raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 4}}}).Marshal()
	for name, data := range map[string][]byte{"joint": joint, "leave joint": leave, "add learner": learner} {
		m := raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 6, Index: 5, LogTerm: 5,
			Entries: []raftpb.Entry{{Index: 6, Term: 6, Type: raftpb.EntryConfChangeV2, Data: data}}}
		if why := CheckMessage(d, 1, &m, false); why >= 0 {
			t.Errorf("%s: dropped as %s", name, DropReasons[why])
		}
	}
	for name, cs := range map[string]raftpb.ConfState{
		"joint":    {Voters: []uint64{1, 2, 4}, VotersOutgoing: []uint64{1, 2, 3}, AutoLeave: true},
		"learners": {Voters: []uint64{1, 2, 3}, Learners: []uint64{4}},
	} {
		m := raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 6,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 100, Term: 6, ConfState: cs}}}
		if why := CheckMessage(d, 1, &m, true); why >= 0 {
			t.Errorf("snapshot %s: dropped as %s", name, DropReasons[why])
		}
	}
	// A learner's acknowledgements pass too.
	m := raftpb.Message{Type: raftpb.MsgAppResp, From: 4, To: 1, Term: 6, Index: 5}
	if why := CheckMessage(d, 1, &m, false); why >= 0 {
		t.Errorf("learner ack dropped as %s", DropReasons[why])
	}
}
