package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Two nodes silent past DeadNodeTimeout (a rack down, or a network
// partition that cuts {2,3} off) hold a majority of shard 2's voters. A
// dead node exits when it comes back (docs/operations.md), and shard 2's
// replacement moves need a majority of {1,2,3}: declaring them dead would
// lose the shard for good, where waiting lets it recover when the nodes
// come back. Neither is declared dead while that majority is away.
func TestBalancerKeepsAShardsQuorumAlive(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3, 4, 5}, 2)
	r.store.shards[0].Replicas = []uint64{1, 4, 5} // shard 1: the balancer's, healthy
	r.store.shards[1].Replicas = []uint64{1, 2, 3} // shard 2: loses 2 of 3 voters
	// With two of its three voters away, shard 2 commits nothing: every
	// replacement move fails.
	r.store.fail = errors.New("no quorum")
	r.prober.down[2], r.prober.down[3] = true, true
	r.rounds(t, 1)
	r.clock.Add(2 * time.Minute)
	r.rounds(t, 1)
	rec, err := r.mgr.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.store.Descriptors() {
		dead := 0
		for _, n := range d.Replicas {
			if m, _ := rec.Member(n); m.State == Dead {
				dead++
			}
		}
		if 2*dead >= len(d.Replicas) {
			t.Fatalf("shard %d (voters %v): %d of them declared dead at once, its quorum is gone for good (node 2 %s, node 3 %s)",
				d.ID, d.Replicas, dead, r.state(t, 2), r.state(t, 3))
		}
	}
}

// A move onto node 4 that failed after its learner step (MoveTimeout while
// catching up, node 4 restarted…) leaves a learner on 4. Node 4 is then
// decommissioned: the planner removes the learner, and the decommission
// finishes (finishDecommissions counts learners as replicas held).
func TestDecommissionRemovesALeftoverLearner(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 4)
	st := learnerStore{r.store}
	b, err := NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: st, Prober: r.prober,
		Leads: func() bool { return true }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	// What an interrupted move 1 -> 4 of shard 2 leaves: 4 a learner.
	r.store.shards[1].Learners = []uint64{4}
	if _, err := r.mgr.Decommission(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		r.clock.Add(5 * time.Second)
		if err := b.Round(ctx); err != nil {
			t.Fatal(err)
		}
		b.Wait()
	}
	if s := r.state(t, 4); s != Removed {
		t.Fatalf("node 4 is still %s after 30 rounds; shard 2: voters %v learners %v", s,
			st.Descriptors()[1].Replicas, st.Descriptors()[1].Learners)
	}
}
