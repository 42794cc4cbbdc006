package store

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/cairn-db/cairn/internal/shard"
)

type fakeLeader struct {
	id   uint64
	lead bool
}

func (f fakeLeader) ID() uint64     { return f.id }
func (f fakeLeader) IsLeader() bool { return f.lead }

// A leadership keeps the time it was first seen, and loses it when lost,
// so one taken again starts a new starvedMinLead.
func TestLeadClockKeepsWhenALeadershipWasTaken(t *testing.T) {
	c := leadClock{}
	t0 := time.Unix(100, 0)
	observeLeads(c, []fakeLeader{{1, true}, {2, false}}, t0)
	observeLeads(c, []fakeLeader{{1, true}, {2, true}}, t0.Add(time.Second))
	if c[1] != t0 || c[2] != t0.Add(time.Second) {
		t.Fatalf("first seen leading: %v", c)
	}
	observeLeads(c, []fakeLeader{{1, false}, {2, true}}, t0.Add(2*time.Second))
	if _, ok := c[1]; ok {
		t.Fatalf("shard 1 no longer led but kept: %v", c)
	}
	observeLeads(c, []fakeLeader{{1, true}, {2, true}}, t0.Add(3*time.Second))
	if c[1] != t0.Add(3*time.Second) || c[2] != t0.Add(time.Second) {
		t.Fatalf("shard 1 led again: %v", c)
	}
}

func TestMoveUnderWayIsALearnerCatchingUp(t *testing.T) {
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}}
	st := raft.Status{Progress: map[uint64]tracker.Progress{
		1: {Match: 5000, State: tracker.StateReplicate},
		2: {Match: 5000, State: tracker.StateReplicate},
		3: {Match: 5000, State: tracker.StateReplicate},
	}}
	st.Commit = 5000
	if moveUnderWay(d, st) {
		t.Fatal("three voters and no learner: no move under way")
	}
	d.Learners = []uint64{4}
	if !moveUnderWay(d, st) {
		t.Fatal("a learner the leader has no progress of: a move under way")
	}
	st.Progress[4] = tracker.Progress{Match: 0, State: tracker.StateSnapshot}
	if !moveUnderWay(d, st) {
		t.Fatal("a learner taking a snapshot: a move under way")
	}
	st.Progress[4] = tracker.Progress{Match: 4990, State: tracker.StateReplicate}
	if moveUnderWay(d, st) {
		t.Fatal("a learner replicating 10 entries behind (a read replica's): no move under way")
	}
}
