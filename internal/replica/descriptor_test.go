package replica

import (
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// Two conf changes applied in one round (as a replica catching up gets a
// joint change and its leave in one batch) bump the epoch twice, as on a
// replica that applies them in two rounds: every member of a shard must
// agree on its epoch.
func TestTwoConfChangesInOneRoundBumpTheEpochTwice(t *testing.T) {
	r := singleReplica(t)
	r.Process()
	before := r.Desc()
	var ents []raftpb.Entry
	for i, node := range []uint64{2, 3} {
		cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: node}}}
		data, err := cc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, raftpb.Entry{Type: raftpb.EntryConfChangeV2, Index: r.Applied() + uint64(i) + 1, Term: r.Status().Term, Data: data})
	}
	r.mu.Lock()
	r.applyRoundLocked(ents)
	r.mu.Unlock()
	got := r.Desc()
	if got.Epoch != before.Epoch+2 || !slices.Equal(got.Learners, []uint64{2, 3}) {
		t.Fatalf("after two conf changes from %+v: %+v, want epoch %d with learners [2 3]", before, got, before.Epoch+2)
	}
	stored, ok, err := StoredDescriptor(r.cfg.Engine, r.id)
	if err != nil || !ok || stored.Epoch != got.Epoch {
		t.Fatalf("stored descriptor %+v (%v, %v), want epoch %d", stored, ok, err, got.Epoch)
	}
}

// A node is leaving a joint configuration when it votes in the outgoing
// half only: not when it stays a voter, becomes a learner (a demotion),
// or is outside the configuration.
func TestIsLeaving(t *testing.T) {
	for _, tc := range []struct {
		name string
		cs   raftpb.ConfState
		want bool
	}{
		{"simple configuration", raftpb.ConfState{Voters: []uint64{1, 2, 3}}, false},
		{"moved away", raftpb.ConfState{Voters: []uint64{4, 2, 3}, VotersOutgoing: []uint64{1, 2, 3}}, true},
		{"stays a voter", raftpb.ConfState{Voters: []uint64{1, 2, 4}, VotersOutgoing: []uint64{1, 2, 3}}, false},
		{"demoted to learner", raftpb.ConfState{Voters: []uint64{4, 2, 3}, VotersOutgoing: []uint64{1, 2, 3}, LearnersNext: []uint64{1}}, false},
		{"not a member", raftpb.ConfState{Voters: []uint64{4, 2, 3}, VotersOutgoing: []uint64{5, 2, 3}}, false},
	} {
		if got := isLeaving(tc.cs, 1); got != tc.want {
			t.Errorf("%s: isLeaving = %v, want %v", tc.name, got, tc.want)
		}
	}
}
