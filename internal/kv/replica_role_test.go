package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// A read replica's coordinator serves serializable and replicas=1/N
// reads of a shard it holds a learner of from that learner (counted),
// sends linearizable reads to the leader (which see the latest write),
// and learns its learner's lag from the leader; the leader's view shows
// the learner's lag too.
func TestReadReplicaServesFromItsLearner(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	if err := c.nodes[2].st.AddReplica(ctx5(t), 1, 4, true); err != nil {
		t.Fatal(err)
	}
	n4 := c.nodes[4].coord
	n4.SetMembers([]kv.Member{{ID: 1, PeerAddr: "p1"}, {ID: 2, PeerAddr: "p2"}, {ID: 3, PeerAddr: "p3"},
		{ID: 4, PeerAddr: "p4", Role: "read-replica"}})
	if !n4.ReadReplica() {
		t.Fatal("node 4 does not know it is a read replica")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n4.RunLagSampler(ctx)
	k := keyOf(c.m, 1, "rr-")
	for i := range 3 {
		v := []byte(fmt.Sprint("v", i))
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, v, kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Linearizable through the read replica: the leader's answer.
		before := n4.LearnerReads()
		got, err := n4.Get(ctx5(t), k, kv.ReadOptions{})
		if err != nil || string(got.Data) != string(v) {
			t.Fatalf("linearizable read through the read replica: %q %v, want %q", got.Data, err, v)
		}
		if n4.LearnerReads() != before {
			t.Fatal("a linearizable read was served by the learner")
		}
	}
	eventually(t, 10*time.Second, func() error {
		before := n4.LearnerReads()
		got, err := n4.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil || string(got.Data) != "v2" {
			return fmt.Errorf("serializable read: %q %v", got.Data, err)
		}
		if _, err := n4.Get(ctx5(t), k, kv.ReadOptions{Ack: 1, From: 3}); err != nil {
			return err
		}
		if d := n4.LearnerReads() - before; d != 2 {
			return fmt.Errorf("the learner served %d of 2 reads", d)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		lags := n4.LearnerLags()
		if len(lags) != 1 || lags[0].Shard != 1 || lags[0].Entries != 0 {
			return fmt.Errorf("learner lags %+v, want shard 1 at 0", lags)
		}
		if m, ok := n4.MaxLearnerLag(); !ok || m != 0 {
			return fmt.Errorf("max lag %d %v", m, ok)
		}
		lead := c.nodes[leaderOf(c, 1)].st.LeaderLearnerLags(1)
		if lag, ok := lead[4]; !ok || lag != 0 {
			return fmt.Errorf("the leader's view %v", lead)
		}
		return nil
	})
	// A voter's node (not a read replica) reports no learner lag.
	if lags := c.nodes[1].coord.LearnerLags(); len(lags) != 0 {
		t.Fatalf("node 1 reports learner lags %+v", lags)
	}
}

// A split of a shard with a read replica's learner gives both halves the
// learner: the read replica still serves reads of either half itself.
func TestSplitKeepsTheReadReplicasLearner(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	if err := c.nodes[2].st.AddReplica(ctx5(t), 1, 4, true); err != nil {
		t.Fatal(err)
	}
	n4 := c.nodes[4].coord
	n4.SetMembers([]kv.Member{{ID: 4, PeerAddr: "p4", Role: "read-replica"}})
	lower, upper, err := c.nodes[1].coord.SplitShard(ctx5(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []uint64{lower.ID, upper.ID} {
		eventually(t, 10*time.Second, func() error {
			r := c.nodes[4].st.Replica(d)
			if r == nil || !r.Desc().IsLearner(4) || r.Desc().IsVoter(4) {
				return fmt.Errorf("node 4's replica of shard %d: %v", d, r != nil)
			}
			return nil
		})
	}
	// A key of each half, written after the split, read by the learners.
	for i, d := range []uint64{lower.ID, upper.ID} {
		var k []byte
		for j := 0; ; j++ {
			k = []byte(fmt.Sprint("half-", i, "-", j))
			if r := c.nodes[4].st.Replica(d); r.Desc().Contains(shard.Token(k)) {
				break
			}
		}
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("x"), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() error {
			before := n4.LearnerReads()
			got, err := n4.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
			if err != nil || string(got.Data) != "x" || n4.LearnerReads() != before+1 {
				return fmt.Errorf("serializable read of %q on shard %d: %q %v", k, d, got.Data, err)
			}
			return nil
		})
	}
}
