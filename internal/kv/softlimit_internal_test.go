package kv

import (
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
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

// Serializable reads go to the replica with the shortest known queue;
// this node wins ties and an idle local queue; reports go stale.
func TestShortestQueuePicksLeastBusyReplica(t *testing.T) {
	c := &Coordinator{cfg: Config{NodeID: 1}}
	d := shard.Descriptor{ID: 5, Replicas: []uint64{1, 2, 3}}
	now := time.Now()
	if got := c.shortestQueue(d, true, now); got != 1 {
		t.Fatalf("idle node: read went to %d, want the local replica", got)
	}
	// This node works on 4 requests of the shard (the read among them).
	for range 4 {
		if _, err := c.admit(5); err != nil {
			t.Fatal(err)
		}
	}
	c.noteDepth(5, 2, 9)
	c.noteDepth(5, 3, 1)
	if got := c.shortestQueue(d, true, time.Now()); got != 3 {
		t.Fatalf("local 3, node 2 at 9, node 3 at 1: read went to %d, want 3", got)
	}
	c.noteDepth(5, 3, 3)
	if got := c.shortestQueue(d, true, time.Now()); got != 1 {
		t.Fatalf("tie at 3: read went to %d, want the local replica", got)
	}
	// Without a local replica the shortest remote wins.
	if got := c.shortestQueue(d, false, time.Now()); got != 3 {
		t.Fatalf("no local replica: read went to %d, want 3", got)
	}
	// Stale reports count as empty queues: node 2 is asked again.
	c.noteDepth(5, 2, 8)
	c.noteDepth(5, 3, 8)
	later := time.Now().Add(remoteDepthTTL + time.Second)
	if got := c.shortestQueue(d, true, later); got == 1 {
		t.Fatalf("stale reports: read stayed local at depth 3, want a remote replica")
	}
}
