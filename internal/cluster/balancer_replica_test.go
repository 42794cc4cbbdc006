package cluster

import (
	"context"
	"slices"
	"sync"
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

// gatedLearnerStore is learnerStore whose learner-only adds after the
// first open ones wait for release before they land: a read replica's
// last learner adds still running.
type gatedLearnerStore struct {
	learnerStore
	mu      sync.Mutex
	open    int // learner adds let through at once
	waiting int // learner adds held back
	release chan struct{}
}

func (f *gatedLearnerStore) AddReplica(ctx context.Context, id, to uint64, learnerOnly bool) error {
	if learnerOnly {
		f.mu.Lock()
		wait := f.open == 0
		if wait {
			f.waiting++
		} else {
			f.open--
		}
		f.mu.Unlock()
		if wait {
			<-f.release
		}
	}
	return f.learnerStore.AddReplica(ctx, id, to, learnerOnly)
}

// set-role voter while the read replica's last learner adds still run
// (on an idle machine the integration test called it as soon as every
// learner had applied something; the adds return once caught up): the
// adds land after the role changed, after the learners the node held were
// removed. The balancer removes those too and only then gives the node
// voters; it ends with its share of voters and no learner. (Before, only
// the node serving set-role removed learners, once: the 2 late ones
// stayed for good next to the node's voters.)
func TestBalancerSetRoleVoterLeavesNoLearner(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	st := &gatedLearnerStore{learnerStore: learnerStore{r.store}, open: 6, release: make(chan struct{})}
	b, err := NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: st, Prober: r.prober,
		Leads: func() bool { return true }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	round := func() {
		t.Helper()
		if err := b.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// settled waits for the moves in flight but the held back ones.
	settled := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			st.mu.Lock()
			held := st.waiting
			st.mu.Unlock()
			if len(b.Status().InFlight) == held {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("moves in flight %v, %d held back", b.Status().InFlight, held)
			}
			time.Sleep(time.Millisecond)
		}
	}
	round()
	b.Wait()
	r.clock.Add(touchGrace) // past the take-over grace
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4", Role: ReadReplica}); err != nil {
		t.Fatal(err)
	}
	for range 4 { // 2 learner adds a round (transfer limit 2)
		round()
		settled()
		r.clock.Add(time.Second)
	}
	learners := 0
	for _, d := range st.Descriptors() {
		if d.IsLearner(4) {
			learners++
		}
	}
	if learners != 6 {
		t.Fatalf("node 4 holds %d learners with 2 adds running, want 6", learners)
	}
	if _, err := r.mgr.SetRole(ctx, 4, Voter); err != nil {
		t.Fatal(err)
	}
	// What the node serving set-role did: remove the learners it saw.
	for _, d := range st.Descriptors() {
		if d.IsLearner(4) {
			if err := st.RemoveReplica(ctx, d.ID, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(st.release) // the 2 running adds land now
	b.Wait()
	for range 20 {
		round()
		b.Wait()
		r.clock.Add(time.Second)
	}
	for _, d := range st.Descriptors() {
		if d.IsLearner(4) || len(d.Replicas) != 3 {
			t.Errorf("shard %d: voters %v learners %v: want 3 voters and no learner on node 4", d.ID, d.Replicas, d.Learners)
		}
	}
	if c := counts(st.Descriptors()); c[4] != 6 {
		t.Errorf("node 4 holds %d voters, want 6 of 24", c[4])
	}
	if m, _ := r.mgr.Cached(); m.Members[3].DropLearners {
		t.Errorf("node 4 still marked to drop its learners: %+v", m.Members[3])
	}
	if p := b.Status().PausedUntil; !p.IsZero() {
		t.Errorf("set-role voter paused rebalancing until %v", p)
	}
}

// A balancer that has just taken over removes a read replica turned
// voter's learners at once (they are no predecessor's move under way),
// and clears the mark only after two rounds without any.
func TestBalancerTakingOverRemovesDroppedLearners(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 4)
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4", Role: ReadReplica}); err != nil {
		t.Fatal(err)
	}
	for i := range r.store.shards {
		r.store.shards[i].Learners = []uint64{4}
	}
	if _, err := r.mgr.SetRole(ctx, 4, Voter); err != nil {
		t.Fatal(err)
	}
	st := learnerStore{r.store}
	b, err := NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: st, Prober: r.prober,
		Leads: func() bool { return true }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	marked := func() bool {
		rec, err := r.mgr.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := rec.Member(4)
		return m.DropLearners
	}
	for round := 1; round <= 3; round++ {
		if err := b.Round(ctx); err != nil {
			t.Fatal(err)
		}
		b.Wait()
		r.clock.Add(time.Second)
		if round == 1 {
			for _, d := range st.Descriptors() {
				if d.HasReplica(4) {
					t.Fatalf("shard %d: voters %v learners %v after the first round: want node 4's learner removed", d.ID, d.Replicas, d.Learners)
				}
			}
		}
		if want := round < 3; marked() != want {
			t.Fatalf("round %d: marked %v, want %v", round, !want, want)
		}
	}
}
