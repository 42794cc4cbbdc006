package store

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/quorum"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// status builds the raft status nextStep reads: voters (incoming and
// outgoing), learners, and every member's match index.
func status(in, out, learners []uint64, auto bool, match map[uint64]uint64) raft.Status {
	var st raft.Status
	st.Config.Voters = quorum.JointConfig{quorum.MajorityConfig{}, nil}
	for _, id := range in {
		st.Config.Voters[0][id] = struct{}{}
	}
	if len(out) > 0 {
		st.Config.Voters[1] = quorum.MajorityConfig{}
		for _, id := range out {
			st.Config.Voters[1][id] = struct{}{}
		}
	}
	st.Config.Learners = map[uint64]struct{}{}
	for _, id := range learners {
		st.Config.Learners[id] = struct{}{}
	}
	st.Config.AutoLeave = auto
	st.Progress = map[uint64]tracker.Progress{}
	for id, m := range match {
		st.Progress[id] = tracker.Progress{Match: m, State: tracker.StateReplicate}
	}
	return st
}

func ccString(s step) string {
	switch {
	case s.done:
		return "done"
	case s.transfer != 0:
		return "transfer"
	case s.cc == nil:
		return "wait"
	}
	return describeCC(*s.cc)
}

// Each step of a move is decided from the applied configuration alone:
// whatever state a crash left, the next call takes the next step.
func TestNextStepOfAMove(t *testing.T) {
	mv := MemberChange{Kind: ChangeMove, Shard: 1, From: 3, To: 4}
	all := map[uint64]uint64{1: 200, 2: 200, 3: 200, 4: 200}
	cases := []struct {
		name string
		st   raft.Status
		want string
	}{
		{"start: add the learner", status([]uint64{1, 2, 3}, nil, nil, false, all), "l4"},
		{"learner behind: wait", status([]uint64{1, 2, 3}, nil, []uint64{4}, false, map[uint64]uint64{1: 200, 2: 200, 3: 200, 4: 99}), "wait"},
		{"learner unknown to the tracker: wait", status([]uint64{1, 2, 3}, nil, []uint64{4}, false, map[uint64]uint64{1: 200, 2: 200, 3: 200}), "wait"},
		{"learner caught up: joint step", status([]uint64{1, 2, 3}, nil, []uint64{4}, false, all), "v4 r3"},
		{"joint with auto leave: wait", status([]uint64{1, 2, 4}, []uint64{1, 2, 3}, nil, true, all), "wait"},
		{"joint left explicit: leave", status([]uint64{1, 2, 4}, []uint64{1, 2, 3}, nil, false, all), "leave joint"},
		{"done", status([]uint64{1, 2, 4}, nil, nil, false, all), "done"},
		{"to a voter, from still in", status([]uint64{1, 2, 3, 4}, nil, nil, false, all), "r3"},
		{"from a learner", status([]uint64{1, 2}, nil, []uint64{3, 4}, false, all), "v4 r3"},
	}
	for _, c := range cases {
		s, err := nextStep(mv, 1, c.st, 100+maxLearnerLag)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.cc != nil && len(s.cc.Changes) == 2 && s.cc.Transition != raftpb.ConfChangeTransitionJointImplicit {
			t.Fatalf("%s: a two-change step not entered as an auto-leave joint configuration", c.name)
		}
		if got := ccString(s); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// The leader moving its own replica hands leadership over first.
	s, err := nextStep(MemberChange{Kind: ChangeMove, Shard: 1, From: 1, To: 4}, 1, status([]uint64{1, 2, 3}, nil, nil, false, all), 100)
	if err != nil || s.transfer == 0 || s.transfer == 1 {
		t.Fatalf("moving the leader: %+v %v", s, err)
	}
	// Errors: the source holds nothing and the destination is no learner;
	// the only voter.
	if _, err := nextStep(MemberChange{Kind: ChangeMove, Shard: 1, From: 9, To: 4}, 1, status([]uint64{1, 2, 3}, nil, nil, false, all), 100); !errors.Is(err, ErrBadChange) {
		t.Fatalf("unknown source: %v", err)
	}
	if _, err := nextStep(MemberChange{Kind: ChangeRemove, Shard: 1, From: 1}, 1, status([]uint64{1}, nil, nil, false, all), 100); !errors.Is(err, ErrBadChange) {
		t.Fatalf("removing the only voter: %v", err)
	}
	if _, err := nextStep(MemberChange{Kind: ChangeAdd, Shard: 1, To: 2, Learner: true}, 1, status([]uint64{1, 2, 3}, nil, nil, false, all), 100); !errors.Is(err, ErrBadChange) {
		t.Fatalf("a voter as learner: %v", err)
	}
}

func TestMemberChangeEncoding(t *testing.T) {
	c := MemberChange{Kind: ChangeAdd, Shard: 7, From: 0, To: 9, Learner: true}
	got, err := UnmarshalMemberChange(c.Marshal())
	if err != nil || got != c {
		t.Fatalf("%+v %v", got, err)
	}
	for _, b := range [][]byte{nil, {1, 9, 0}, {2, 1, 0, 1, 1, 1}, append(c.Marshal(), 0)} {
		if _, err := UnmarshalMemberChange(b); !errors.Is(err, ErrBadChange) {
			t.Errorf("%x: %v", b, err)
		}
	}
}
