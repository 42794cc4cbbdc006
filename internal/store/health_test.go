package store

import (
	"testing"
	"time"

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

func TestMoveUnderWayIsALearnerNotAReadReplicas(t *testing.T) {
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}}
	if moveUnderWay(d, nil) {
		t.Fatal("three voters and no learner: no move under way")
	}
	d.Learners = []uint64{4}
	if !moveUnderWay(d, nil) {
		t.Fatal("a learner: a move under way")
	}
	if moveUnderWay(d, map[uint64]bool{4: true}) {
		t.Fatal("a read replica's learner: no move under way")
	}
	d.Learners = []uint64{4, 5}
	if !moveUnderWay(d, map[uint64]bool{4: true}) {
		t.Fatal("a learner next to a read replica's: a move under way")
	}
}
