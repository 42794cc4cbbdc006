package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// splitView is the balancing node's view of a cluster whose shards are
// the fakeStore's: it knows nothing of the shards in hidden (the new half
// of a split of a shard it holds no replica of) until it learns them.
type splitView struct {
	*fakeStore
	mu     sync.Mutex
	hidden map[uint64]bool
}

func (v *splitView) Descriptors() []shard.Descriptor {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []shard.Descriptor
	for _, d := range v.fakeStore.Descriptors() {
		if !v.hidden[d.ID] {
			out = append(out, d)
		}
	}
	return out
}

func (v *splitView) LearnDescriptor(d shard.Descriptor) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	news := v.hidden[d.ID]
	delete(v.hidden, d.ID)
	return news
}

// splitRig is four nodes, shard 1 on {1,2,3} (the balancer's, node 1),
// shard 2 on {2,3,4} split in two: shard 2 keeps the lower half, the new
// shard (its id the split point) takes the upper half on the same
// replicas, node 4's among them. Node 1 holds no replica of either and
// has not learned of the new one. Node 4 is decommissioning.
func splitRig(t *testing.T) (*balancerRig, *splitView, uint64) {
	t.Helper()
	r := newRig(t, []uint64{1, 2, 3, 4}, 2)
	r.store.shards[0].Replicas = []uint64{1, 2, 3}
	r.store.shards[1].Replicas = []uint64{2, 3, 4}
	two := &r.store.shards[1]
	mid := two.Start + (0-two.Start)/2
	child := shard.Descriptor{ID: mid, Start: mid, End: two.End, Replicas: []uint64{2, 3, 4}, Epoch: two.Epoch + 1}
	two.End, two.Epoch = mid, two.Epoch+1
	r.store.shards = append(r.store.shards, child)
	view := &splitView{fakeStore: r.store, hidden: map[uint64]bool{child.ID: true}}
	b, err := NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: view, Prober: r.prober,
		Leads: func() bool { return true }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	if _, err := r.mgr.Decommission(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	return r, view, child.ID
}

// heldBy returns a shard with a replica on node, among the cluster's.
func heldBy(st *fakeStore, node uint64) (shard.Descriptor, bool) {
	for _, d := range st.Descriptors() {
		if d.HasReplica(node) {
			return d, true
		}
	}
	return shard.Descriptor{}, false
}

// A split's new half starts on its parent's replicas, the draining
// node's among them; the balancer's node, holding neither half, does not
// know it. Once node 4's replica of shard 2 is moved, node 4 holds nothing
// in that view: it must not be marked removed (and exit) while it still
// holds a voter of the new shard, which would then run on two of three
// voters with nothing moving the third. The balancer re-reads the
// members' replicas, learns the new shard, moves its replica off node 4,
// and only then removes node 4.
func TestDecommissionWaitsForASplitsNewHalf(t *testing.T) {
	r, _, child := splitRig(t)
	for round := 1; round <= 12; round++ {
		r.clock.Add(5 * time.Second)
		r.rounds(t, 1)
		d, held := heldBy(r.store, 4)
		if r.state(t, 4) == Removed {
			if held {
				t.Fatalf("round %d: node 4 marked removed while it holds a replica of shard %d (voters %v; the split's new half is %d)",
					round, d.ID, d.Replicas, child)
			}
			return
		}
	}
	d, _ := heldBy(r.store, 4)
	t.Fatalf("node 4 is still %s after 12 rounds; it holds shard %d (voters %v)", r.state(t, 4), d.ID, d.Replicas)
}

// A re-read that not enough members answer is no proof: while nodes 2
// and 3 (the voters of the new shard, with node 4) do not answer, node 4
// stays decommissioning; once they answer, the drain finishes.
func TestDecommissionWaitsForACompleteView(t *testing.T) {
	r, view, child := splitRig(t)
	r.clock.Add(5 * time.Second)
	r.rounds(t, 1) // moves node 4's replica of shard 2
	if d, _ := heldBy(r.store, 4); d.ID != child {
		t.Fatalf("after the first round node 4 holds shard %d, want only the new shard %d", d.ID, child)
	}
	r.prober.mu.Lock()
	r.prober.mute = map[uint64]bool{2: true, 3: true, 4: true}
	r.prober.mu.Unlock()
	for round := 2; round <= 5; round++ {
		r.clock.Add(5 * time.Second)
		r.rounds(t, 1)
		if s := r.state(t, 4); s == Removed {
			t.Fatalf("round %d: node 4 marked removed on a view that no member confirmed (it holds the new shard %d; view %v)",
				round, child, view.Descriptors())
		}
	}
	r.prober.mu.Lock()
	r.prober.mute = nil
	r.prober.mu.Unlock()
	for round := 6; round <= 12; round++ {
		r.clock.Add(5 * time.Second)
		r.rounds(t, 1)
		if r.state(t, 4) == Removed {
			if d, held := heldBy(r.store, 4); held {
				t.Fatalf("round %d: node 4 marked removed while it holds shard %d", round, d.ID)
			}
			return
		}
	}
	t.Fatalf("node 4 is still %s once the members answered", r.state(t, 4))
}
