package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// learnerStore is fakeStore with learners: a learner-only add makes one,
// a removal removes a voter or a learner.
type learnerStore struct{ *fakeStore }

func (f learnerStore) Descriptors() []shard.Descriptor {
	out := f.fakeStore.Descriptors()
	for i := range out {
		out[i].Learners = slices.Clone(out[i].Learners)
	}
	return out
}

func (f learnerStore) AddReplica(_ context.Context, id, to uint64, learnerOnly bool) error {
	return f.change(id, func(d *shard.Descriptor) {
		if learnerOnly {
			d.Learners = append(d.Learners, to)
			slices.Sort(d.Learners)
		} else {
			d.Replicas = append(d.Replicas, to)
		}
	})
}

func (f learnerStore) RemoveReplica(_ context.Context, id, node uint64) error {
	return f.change(id, func(d *shard.Descriptor) {
		d.Replicas = slices.DeleteFunc(d.Replicas, func(n uint64) bool { return n == node })
		d.Learners = slices.DeleteFunc(d.Learners, func(n uint64) bool { return n == node })
	})
}

// The balancer gives a read replica a learner of every shard and no
// voter, without taking its own learner moves, nor set-role's removal of
// them, for manual changes that pause rebalancing; once a voter, the node
// gets its share of voters.
func TestBalancerReadReplicaLearners(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	st := learnerStore{r.store}
	b, err := NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: st, Prober: r.prober,
		Leads: func() bool { return true }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rounds := func(n int) {
		for range n {
			if err := b.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.Wait()
		}
	}
	rounds(1)
	r.clock.Add(touchGrace) // past the take-over grace
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4", Role: ReadReplica}); err != nil {
		t.Fatal(err)
	}
	rounds(8)
	for _, d := range st.Descriptors() {
		if !d.IsLearner(4) || d.IsVoter(4) || len(d.Replicas) != 3 {
			t.Fatalf("shard %d: voters %v learners %v", d.ID, d.Replicas, d.Learners)
		}
	}
	if p := b.Status().PausedUntil; !p.IsZero() {
		t.Fatalf("the read replica's learners paused rebalancing until %v", p)
	}
	r.clock.Add(touchGrace + time.Second) // its learner moves are old news
	rounds(1)
	if _, err := r.mgr.SetRole(ctx, 4, Voter); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Descriptors() {
		if err := st.RemoveReplica(ctx, d.ID, 4); err != nil {
			t.Fatal(err)
		}
	}
	rounds(10)
	if p := b.Status().PausedUntil; !p.IsZero() {
		t.Fatalf("set-role's learner removal paused rebalancing until %v", p)
	}
	if c := counts(st.Descriptors()); c[4] != 6 {
		t.Fatalf("node 4 holds %d voters once a voter, want 6 of 24", c[4])
	}
}
