package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// fakeStore applies replica moves to its descriptors at once.
type fakeStore struct {
	mu     sync.Mutex
	shards []shard.Descriptor
	fail   error
	calls  int
}

func (f *fakeStore) Descriptors() []shard.Descriptor {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.shards)
	for i := range out {
		out[i].Replicas = slices.Clone(out[i].Replicas)
	}
	return out
}

// LearnDescriptor learns nothing: the fake's shards are the cluster's.
func (f *fakeStore) LearnDescriptor(shard.Descriptor) bool { return false }

func (f *fakeStore) change(id uint64, fn func(*shard.Descriptor)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return f.fail
	}
	for i := range f.shards {
		if f.shards[i].ID == id {
			fn(&f.shards[i])
			f.shards[i].Epoch++
			return nil
		}
	}
	return errors.New("no such shard")
}

func (f *fakeStore) MoveReplica(_ context.Context, id, from, to uint64) error {
	return f.change(id, func(d *shard.Descriptor) {
		d.Replicas = append(slices.DeleteFunc(d.Replicas, func(n uint64) bool { return n == from }), to)
	})
}

func (f *fakeStore) AddReplica(_ context.Context, id, to uint64, _ bool) error {
	return f.change(id, func(d *shard.Descriptor) { d.Replicas = append(d.Replicas, to) })
}

func (f *fakeStore) RemoveReplica(_ context.Context, id, node uint64) error {
	return f.change(id, func(d *shard.Descriptor) {
		d.Replicas = slices.DeleteFunc(d.Replicas, func(n uint64) bool { return n == node })
	})
}

// fakeProber answers for the nodes not in down; those not in mute
// either report the replicas truth places on them.
type fakeProber struct {
	mu    sync.Mutex
	down  map[uint64]bool
	mute  map[uint64]bool
	truth *fakeStore
}

func (p *fakeProber) Alive(_ context.Context, n uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.down[n]
}

func (p *fakeProber) Replicas(_ context.Context, n uint64) ([]shard.Descriptor, error) {
	p.mu.Lock()
	silent := p.down[n] || p.mute[n]
	p.mu.Unlock()
	if silent {
		return nil, errors.New("no answer")
	}
	var out []shard.Descriptor
	for _, d := range p.truth.Descriptors() {
		if d.HasReplica(n) {
			out = append(out, d.Clone())
		}
	}
	return out, nil
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type balancerRig struct {
	kv     *memKV
	mgr    *Manager
	store  *fakeStore
	prober *fakeProber
	clock  *fakeClock
	leads  bool
	b      *Balancer
}

func newRig(t *testing.T, nodes []uint64, shards int) *balancerRig {
	t.Helper()
	m, err := shard.Bootstrap(nodes, shards, 3)
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{shards: m.Shards}
	r := &balancerRig{kv: newMemKV(), store: st, prober: &fakeProber{down: map[uint64]bool{}, truth: st},
		clock: &fakeClock{now: time.Unix(1000, 0)}, leads: true}
	r.mgr, err = NewManager(ManagerConfig{NodeID: 1, KV: r.kv, Replication: 3, Descriptors: r.store.Descriptors, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	peers := map[uint64]string{}
	for _, n := range nodes {
		peers[n] = "p"
	}
	if _, err := r.mgr.Bootstrap(context.Background(), peers); err != nil {
		t.Fatal(err)
	}
	r.b, err = NewBalancer(BalancerConfig{NodeID: 1, Manager: r.mgr, Mover: r.store, Prober: r.prober,
		Leads: func() bool { return r.leads }, Replication: 3, DeadNodeTimeout: time.Minute, Now: r.clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rounds runs n rounds, each waiting for its moves.
func (r *balancerRig) rounds(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := r.b.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.b.Wait()
	}
}

func (r *balancerRig) state(t *testing.T, id uint64) State {
	t.Helper()
	rec, err := r.mgr.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := rec.Member(id)
	return m.State
}

func TestBalancerSpreadsToAJoinedNode(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	r.rounds(t, 20)
	c := counts(r.store.Descriptors())
	if c[4] != 6 {
		t.Fatalf("node 4 holds %d of 24 replicas, want 6 (%v)", c[4], c)
	}
}

func TestBalancerOnlyOnShardOneLeader(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	if _, err := r.mgr.Join(context.Background(), JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	r.leads = false
	r.rounds(t, 5)
	if r.store.calls != 0 || r.b.Status().Leading {
		t.Fatalf("a node not leading shard 1 moved %d replicas", r.store.calls)
	}
}

func TestBalancerDrainsAndRemovesADecommissionedNode(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3, 4}, 8)
	if _, err := r.mgr.Decommission(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	r.rounds(t, 20)
	if c := counts(r.store.Descriptors()); c[2] != 0 {
		t.Fatalf("node 2 still holds %d replicas", c[2])
	}
	if s := r.state(t, 2); s != Removed {
		t.Fatalf("node 2 is %s after its drain, want removed", s)
	}
	for _, d := range r.store.Descriptors() {
		if len(d.Replicas) != 3 {
			t.Fatalf("shard %d has replicas %v", d.ID, d.Replicas)
		}
	}
}

func TestBalancerDeclaresASilentNodeDead(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3, 4}, 8)
	r.prober.down[3] = true
	r.rounds(t, 1)
	r.clock.Add(59 * time.Second)
	r.rounds(t, 1)
	if s := r.state(t, 3); s != Active {
		t.Fatalf("node 3 is %s before the timeout", s)
	}
	r.clock.Add(2 * time.Second)
	r.rounds(t, 15)
	if s := r.state(t, 3); s != Dead {
		t.Fatalf("node 3 is %s after the timeout, want dead", s)
	}
	if c := counts(r.store.Descriptors()); c[3] != 0 {
		t.Fatalf("dead node 3 still holds %d replicas", c[3])
	}
}

func TestBalancerKeepsASilentNodeItCannotReplace(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 4)
	r.prober.down[3] = true
	r.rounds(t, 1)
	r.clock.Add(time.Hour)
	r.rounds(t, 1)
	if s := r.state(t, 3); s != Active {
		t.Fatalf("node 3 is %s: declared dead with no node to take its replicas", s)
	}
}

func TestBalancerBacksOffAfterAFailedMove(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 4)
	if _, err := r.mgr.Join(context.Background(), JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	r.store.fail = errors.New("moves not supported")
	r.rounds(t, 6)
	if r.store.calls == 0 || r.store.calls > 4 {
		t.Fatalf("%d moves tried over 4 shards: a failed shard was retried before its back-off", r.store.calls)
	}
	r.store.fail = nil
	r.clock.Add(31 * time.Second)
	r.rounds(t, 10)
	if c := counts(r.store.Descriptors()); c[4] != 3 {
		t.Fatalf("node 4 holds %d of 12 replicas after the back-off, want 3", c[4])
	}
}

func TestBalancerUsesTheRecordsTransferLimit(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 16)
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	one := 1
	if _, err := r.mgr.SetSettings(ctx, Settings{TransferLimit: &one}); err != nil {
		t.Fatal(err)
	}
	r.rounds(t, 1)
	if r.store.calls != 1 {
		t.Fatalf("%d moves in one round with transfer limit 1", r.store.calls)
	}
}

var quiet = slog.New(slog.DiscardHandler)

// A move made by hand pauses rebalancing (the balancer does not undo it at
// once); repairs go on; after the pause the counts are evened out.
func TestBalancerPausesAfterAManualMove(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3, 4}, 4)
	r.rounds(t, 1)          // the balancer sees the epochs
	r.clock.Add(touchGrace) // past its take-over (TestBalancerTakesOverWithoutPausing)
	r.rounds(t, 1)
	if err := r.store.MoveReplica(context.Background(), 1, 1, 4); err != nil {
		t.Fatal(err)
	}
	calls := r.store.calls
	r.rounds(t, 3)
	if r.store.calls != calls {
		t.Fatalf("the balancer moved %d replicas right after a manual move", r.store.calls-calls)
	}
	if !r.b.Status().PausedUntil.After(r.clock.Now()) {
		t.Fatal("no pause reported")
	}
	// A repair is not paused.
	if _, err := r.mgr.Decommission(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	r.rounds(t, 5)
	if c := counts(r.store.Descriptors()); c[2] != 0 {
		t.Fatalf("node 2 still holds %d replicas during the pause", c[2])
	}
	// The balancer's own moves do not pause it again: after the pause,
	// counts even out.
	r.clock.Add(3 * time.Minute)
	r.rounds(t, 10)
	c := counts(r.store.Descriptors())
	lo, hi := 100, 0
	for _, n := range []uint64{1, 3, 4} {
		lo, hi = min(lo, c[n]), max(hi, c[n])
	}
	if hi-lo > 1 {
		t.Fatalf("counts %v not even after the pause", c)
	}
}

// Rebalancing switched off, or paused in the record (a move by hand on any
// node), plans no balance move; the record's pause ends.
func TestBalancerHonoursTheRecordsPauseAndSwitch(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	ctx := context.Background()
	if _, err := r.mgr.Join(ctx, JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := r.mgr.SetSettings(ctx, Settings{Rebalance: &off}); err != nil {
		t.Fatal(err)
	}
	r.rounds(t, 3)
	if r.store.calls != 0 {
		t.Fatalf("%d moves with rebalancing off", r.store.calls)
	}
	on := true
	if _, err := r.mgr.SetSettings(ctx, Settings{Rebalance: &on}); err != nil {
		t.Fatal(err)
	}
	if err := r.mgr.PauseRebalancing(ctx, r.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// A shorter pause does not shorten it.
	if err := r.mgr.PauseRebalancing(ctx, r.clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(30 * time.Second)
	r.rounds(t, 3)
	if r.store.calls != 0 {
		t.Fatalf("%d moves during the record's pause", r.store.calls)
	}
	r.clock.Add(31 * time.Second)
	r.rounds(t, 10)
	if c := counts(r.store.Descriptors()); c[4] != 6 {
		t.Fatalf("node 4 holds %d of 24 replicas after the pause", c[4])
	}
}

// A node that has just become the balancer takes the changes that land
// then as its predecessor's moves, not an operator's: rebalancing goes on
// (a join is not held up for the manual pause whenever shard 1's
// leadership moves, which a move of shard 1's own replica causes).
func TestBalancerTakesOverWithoutPausing(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 8)
	r.leads = false
	r.rounds(t, 2)
	r.leads = true
	r.rounds(t, 1) // takes over; no member to move to yet
	// The previous balancer's move lands.
	if err := r.store.MoveReplica(context.Background(), 1, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mgr.Join(context.Background(), JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	r.clock.Add(2 * time.Second)
	r.rounds(t, 20)
	if p := r.b.Status().PausedUntil; !p.IsZero() {
		t.Fatalf("paused until %v after taking over", p)
	}
	if c := counts(r.store.Descriptors()); c[4] != 6 {
		t.Fatalf("node 4 holds %d of 24 replicas, want 6 (%v)", c[4], c)
	}
}

// A change that continues a move under way last round (the shard had a
// learner) is not taken for a manual move, whoever runs it: rebalancing
// goes on.
func TestBalancerTakesAMoveUnderWayForNoManualOne(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3, 4}, 4)
	// Another node's move of shard 1 has added node 4 as a learner.
	r.store.mu.Lock()
	r.store.shards[0].Learners = []uint64{4}
	r.store.shards[0].Epoch++
	r.store.mu.Unlock()
	r.rounds(t, 1)
	r.clock.Add(touchGrace) // past its take-over
	r.rounds(t, 1)
	// The move finishes: node 4 promoted, another voter out.
	r.store.mu.Lock()
	d := &r.store.shards[0]
	d.Learners = nil
	d.Replicas = append(slices.Clone(d.Replicas[1:]), 4)
	d.Epoch += 2
	r.store.mu.Unlock()
	r.rounds(t, 1)
	if p := r.b.Status().PausedUntil; !p.IsZero() {
		t.Fatalf("paused until %v by a move under way", p)
	}
}

// A balancer that takes over while its predecessor's move onto a new
// node is still under way (the new node a learner of a shard) counts that
// replica as the new node's and charges it to the transfer limit: it
// plans one more move onto the node, not its whole share again.
func TestBalancerCountsItsPredecessorsMoveUnderWay(t *testing.T) {
	r := newRig(t, []uint64{1, 2, 3}, 3)
	r.leads = false
	r.rounds(t, 1)
	if _, err := r.mgr.Join(context.Background(), JoinRequest{NodeID: 4, HTTPAddr: "h4", PeerAddr: "p4"}); err != nil {
		t.Fatal(err)
	}
	// The previous balancer's move of shard 1 onto node 4: a learner yet.
	r.store.mu.Lock()
	r.store.shards[0].Learners = []uint64{4}
	r.store.mu.Unlock()
	r.leads = true
	r.rounds(t, 1)
	if r.store.calls != 1 {
		t.Fatalf("the new balancer moved %d replicas onto node 4 with one more on its way (share 2, limit 2), want 1", r.store.calls)
	}
	// The predecessor's move lands; 9 replicas over 4 nodes.
	r.store.mu.Lock()
	d := &r.store.shards[0]
	d.Learners = nil
	d.Replicas = append(slices.DeleteFunc(d.Replicas, func(n uint64) bool { return n == 3 }), 4)
	d.Epoch++
	r.store.mu.Unlock()
	r.rounds(t, 5)
	if c := counts(r.store.Descriptors()); c[4] != 2 {
		t.Fatalf("node 4 holds %d replicas after the join, want 2 (counts %v)", c[4], c)
	}
}

// A balancer taking over counts a learner on its way to a node as that
// node's move in flight, but a read replica's learner is there to stay.
func TestPredecessorMovesLeaveReadReplicasOut(t *testing.T) {
	d := shard.Descriptor{ID: 7, Replicas: []uint64{1, 2, 3}, Learners: []uint64{4, 5}}
	in, skip := predecessorMoves(d, 3, map[uint64]bool{5: true}, nil, nil)
	if len(in) != 1 || in[0].To != 4 || in[0].Shard != 7 || len(skip) != 0 {
		t.Fatalf("in flight %v, skipped %v: want the move to 4 only", in, skip)
	}
	d.Learners = []uint64{5}
	if in, skip := predecessorMoves(d, 3, map[uint64]bool{5: true}, nil, nil); len(in) != 0 || len(skip) != 0 {
		t.Fatalf("a read replica's learner alone: in flight %v, skipped %v; want neither", in, skip)
	}
	d.Replicas = []uint64{1, 2, 3, 4}
	if _, skip := predecessorMoves(d, 3, map[uint64]bool{5: true}, nil, nil); len(skip) != 1 {
		t.Fatalf("a joint configuration next to a read replica's learner: skipped %v, want the shard", skip)
	}
}
