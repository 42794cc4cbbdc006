package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// oneNode starts a single-node cluster with the fault hook on.
func oneNode(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{NodeID: 1, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		InitialCluster: map[uint64]string{1: "127.0.0.1:0"}, Replication: 1, Shards: 1, FaultInjection: true,
		TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func put(t *testing.T, s *Server, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := s.coord.Put(ctx, []byte(fmt.Sprint("k", i)), []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A clock fault moves the readings the leader stamps its entries with:
// the shard clock steps by one clamped step (DedupTTL/8) at the first
// stamp after a 2-minute skew, however little real time passed.
func TestClockSkewMovesTheLeadersStamps(t *testing.T) {
	s := oneNode(t)
	put(t, s, 0)
	var r *replica.Replica
	for _, x := range s.store.Replicas() {
		r = x
	}
	before := r.ShardClock()
	faults{s}.ClockOffset(2*time.Minute, false)
	if s.clock.Now().Sub(time.Now()) < time.Minute {
		t.Fatal("the node's wall clock did not move")
	}
	put(t, s, 1)
	step := r.ShardClock() - before
	if step < 10*time.Second {
		t.Fatalf("shard clock moved %v after a 2m skew of the leader, want a clamped step of about 15s", step)
	}
	// Healing steps the readings back: the shard clock stands still (it
	// never runs backwards) and writes keep working.
	faults{s}.ClockOffset(0, false)
	after := r.ShardClock()
	put(t, s, 2)
	if got := r.ShardClock(); got < after {
		t.Fatalf("shard clock went back from %v to %v", after, got)
	}
}
