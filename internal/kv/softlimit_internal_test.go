package kv

import (
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// A shard's queue admits up to its soft limit, refuses the next request
// with ErrShardOverloaded (an ErrOverloaded: 503) and counts it, admits
// again once a request leaves, and leaves other shards alone.
func TestShardSoftLimitRejectsThenAdmits(t *testing.T) {
	c := &Coordinator{cfg: Config{NodeID: 1, ShardSoftLimit: 3}}
	var held []*shardQueue
	for i := range 3 {
		q, err := c.admit(7)
		if err != nil {
			t.Fatalf("request %d refused under the limit: %v", i, err)
		}
		held = append(held, q)
	}
	if _, err := c.admit(7); !errors.Is(err, ErrShardOverloaded) || !errors.Is(err, ErrOverloaded) {
		t.Fatalf("request over the limit: %v, want ErrShardOverloaded", err)
	}
	if q, err := c.admit(8); err != nil {
		t.Fatalf("another shard refused: %v", err)
	} else {
		q.leave()
	}
	held[0].leave()
	q, err := c.admit(7)
	if err != nil {
		t.Fatalf("refused after a request left: %v", err)
	}
	q.leave()
	for _, q := range held[1:] {
		q.leave()
	}
	got := map[uint64]ShardQueue{}
	for _, sq := range c.ShardQueues() {
		got[sq.Shard] = sq
	}
	if got[7].Depth != 0 || got[7].Rejected != 1 || got[8].Rejected != 0 {
		t.Fatalf("queues %+v: want shard 7 empty with 1 rejection, shard 8 none", got)
	}
}

// Limit 0 is off: depths are still counted.
func TestShardSoftLimitOff(t *testing.T) {
	c := &Coordinator{cfg: Config{NodeID: 1}}
	for range 10000 {
		if _, err := c.admit(1); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.ShardQueues()[0].Depth; d != 10000 {
		t.Fatalf("depth %d, want 10000", d)
	}
}

// Serializable reads stay on this node's replica unless another's known
// queue is clearly shorter (the local one at least localMargin, the other
// under half of it); without a local replica the shortest queue wins;
// reports go stale.
func TestShortestQueuePicksLeastBusyReplica(t *testing.T) {
	c := &Coordinator{cfg: Config{NodeID: 1}}
	d := shard.Descriptor{ID: 5, Replicas: []uint64{1, 2, 3}}
	if got := c.shortestQueue(d, true, time.Now()); got != 1 {
		t.Fatalf("idle node: read went to %d, want the local replica", got)
	}
	// This node works on 21 requests of the shard (the read among them).
	for range 21 {
		if _, err := c.admit(5); err != nil {
			t.Fatal(err)
		}
	}
	c.noteDepth(5, 2, 30)
	c.noteDepth(5, 3, 1)
	if got := c.shortestQueue(d, true, time.Now()); got != 3 {
		t.Fatalf("local 20, node 2 at 30, node 3 at 1: read went to %d, want 3", got)
	}
	c.noteDepth(5, 3, 10)
	if got := c.shortestQueue(d, true, time.Now()); got != 1 {
		t.Fatalf("local 20, node 3 at 10 (not under half): read went to %d, want the local replica", got)
	}
	// Without a local replica the shortest remote wins.
	if got := c.shortestQueue(d, false, time.Now()); got != 3 {
		t.Fatalf("no local replica: read went to %d, want 3", got)
	}
	// A short local queue keeps the read whatever the others report.
	c2 := &Coordinator{cfg: Config{NodeID: 1}}
	for range localMargin {
		_, _ = c2.admit(5)
	}
	c2.noteDepth(5, 2, 0)
	if got := c2.shortestQueue(d, true, time.Now()); got != 1 {
		t.Fatalf("local queue %d below the margin: read went to %d", localMargin-1, got)
	}
	// Stale reports count as empty queues: the others are asked again.
	c.noteDepth(5, 2, 30)
	c.noteDepth(5, 3, 30)
	later := time.Now().Add(remoteDepthTTL + time.Second)
	if got := c.shortestQueue(d, true, later); got == 1 {
		t.Fatalf("stale reports: read stayed local at depth 20, want a remote replica")
	}
}

// A serializable coverage query scans each shard on this node's replica
// unless its queue here is long and another replica's clearly shorter
// (coverQueue, the rule of serializable reads; the query itself holds no
// place in the queue); a linearizable one stays local whatever the
// queues, and a replica that failed the shard is not chosen.
func TestCoverPlanAvoidsLongQueueWhenSerializable(t *testing.T) {
	c := &Coordinator{cfg: Config{NodeID: 1}}
	shards := []shard.Descriptor{{ID: 5, Replicas: []uint64{1, 2, 3}}, {ID: 6, Replicas: []uint64{1, 2, 3}}}
	holds := func(uint64) bool { return true }
	where := func(plan map[uint64][]wire.ScanShard) map[uint64]uint64 {
		out := map[uint64]uint64{}
		for n, ss := range plan {
			for _, s := range ss {
				out[s.ID] = n
			}
		}
		return out
	}
	now := time.Now()
	if got := where(c.planCover(shards, holds, nil, false, now)); got[5] != 1 || got[6] != 1 {
		t.Fatalf("idle: plan %v, want every shard on node 1", got)
	}
	// Shard 5 has 20 requests queued here; node 3 reported 2, node 2 30.
	for range 20 {
		if _, err := c.admit(5); err != nil {
			t.Fatal(err)
		}
	}
	c.noteDepth(5, 2, 30)
	c.noteDepth(5, 3, 2)
	if got := where(c.planCover(shards, holds, nil, false, now)); got[5] != 3 || got[6] != 1 {
		t.Fatalf("shard 5 busy here: serializable plan %v, want shard 5 on node 3, shard 6 on node 1", got)
	}
	if got := where(c.planCover(shards, holds, nil, true, now)); got[5] != 1 || got[6] != 1 {
		t.Fatalf("linearizable plan %v, want every shard on node 1", got)
	}
	// Node 3 failed shard 5: the local replica, not node 3.
	bad := map[uint64]map[uint64]bool{5: {3: true}}
	if got := where(c.planCover(shards, holds, bad, false, now)); got[5] == 3 {
		t.Fatalf("node 3 failed shard 5, yet the plan is %v", got)
	}
	// Exactly localMargin requests queued (the query not among them) are
	// enough to leave; one fewer is not.
	c2 := &Coordinator{cfg: Config{NodeID: 1}}
	for range localMargin - 1 {
		_, _ = c2.admit(5)
	}
	c2.noteDepth(5, 2, 0)
	c2.noteDepth(5, 3, 0)
	if got := where(c2.planCover(shards, holds, nil, false, now)); got[5] != 1 {
		t.Fatalf("local queue %d: plan %v, want shard 5 local", localMargin-1, got)
	}
	_, _ = c2.admit(5)
	if got := where(c2.planCover(shards, holds, nil, false, now)); got[5] == 1 {
		t.Fatalf("local queue %d: plan %v, want shard 5 elsewhere", localMargin, got)
	}
}
