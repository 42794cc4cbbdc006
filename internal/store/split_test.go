package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// leaderOf waits for a leader of shard id among the running nodes.
func (c *grpcCluster) leaderOf(id uint64) *replica.Replica {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.st == nil {
				continue
			}
			if r := n.st.Replica(id); r != nil && r.IsLeader() {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no leader of shard %d", id)
	return nil
}

// put writes key=value under request id reqID through the leader of the
// shard that owns the key in the first running node's view, following
// the split (a wrong-shard answer re-routes), until ctx ends.
func (c *grpcCluster) put(ctx context.Context, reqID, key, value string) (wire.Result, uint64, error) {
	cmd := wire.Command{RequestID: []byte(reqID), Op: wire.OpPut, Key: []byte(key), Value: []byte(value)}
	data := cmd.Marshal()
	for {
		var st *Store
		for _, id := range []uint64{1, 2, 3, 4} {
			if n := c.nodes[id]; n != nil && n.st != nil {
				st = n.st
				break
			}
		}
		d, _ := st.Route(shard.Token(cmd.Key))
		var res replica.Result
		err := replica.ErrNotLeader
		for _, n := range c.nodes {
			if n.st == nil {
				continue
			}
			if r := n.st.Replica(d.ID); r != nil && r.IsLeader() {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				res, err = r.ProposeEncoded(actx, cmd.RequestID, cmd.Key, data)
				cancel()
				break
			}
		}
		if err == nil && res.Status != wire.StatusWrongShard {
			return res.Result, d.ID, nil
		}
		if ctx.Err() != nil {
			return wire.Result{}, 0, fmt.Errorf("put %s: %v (last status %v)", key, ctx.Err(), res.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkSplitAll waits until every running node holds both halves with the
// expected descriptors and every acknowledged key is readable from the
// replica of the half that owns it, at the leader's commit index.
func (c *grpcCluster) checkSplitAll(nodes []uint64, lower, upper shard.Descriptor, acked map[string]string) {
	t := c.t
	for _, want := range []shard.Descriptor{lower, upper} {
		commit := c.leaderOf(want.ID).Status().Commit
		for _, id := range nodes {
			r := c.nodes[id].st.Replica(want.ID)
			if r == nil {
				t.Fatalf("node %d holds no replica of shard %d", id, want.ID)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := r.WaitApplied(ctx, commit)
			cancel()
			if err != nil {
				t.Fatalf("node %d shard %d: applied %d, want %d: %v", id, want.ID, r.Applied(), commit, err)
			}
			if d := r.Desc(); d.Start != want.Start || d.End != want.End || d.Epoch < want.Epoch {
				t.Fatalf("node %d: shard %d descriptor %+v, want %+v", id, want.ID, d, want)
			}
		}
	}
	for _, id := range nodes {
		for k, v := range acked {
			owner := lower.ID
			if upper.Contains(shard.Token([]byte(k))) {
				owner = upper.ID
			}
			r := c.nodes[id].st.Replica(owner)
			got, _, err := r.Get([]byte(k))
			if err != nil || string(got) != v {
				t.Fatalf("node %d shard %d: key %s = %q, %v; want %q", id, owner, k, got, err, v)
			}
			// The other half refuses the key.
			other := lower.ID + upper.ID - owner
			if _, _, err := c.nodes[id].st.Replica(other).Get([]byte(k)); err == nil {
				t.Fatalf("node %d: shard %d serves key %s of shard %d", id, other, k, owner)
			}
		}
	}
}

// keyIn returns a key (with prefix) whose token the descriptor owns.
func keyIn(d shard.Descriptor, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprint(prefix, i)
		if d.Contains(shard.Token([]byte(k))) {
			return k
		}
	}
}

// A split under a steady write load: both halves end on all three nodes
// with the right ranges and epochs; every acknowledged write, before,
// during and after, is readable from the half that owns its key; the
// new half elects a leader and takes writes.
func TestSplitUnderLoad(t *testing.T) {
	c := newMoveCluster(t, 3)
	acked := map[string]string{}
	var mu sync.Mutex
	ctx := moveCtx(t)
	for i := 0; i < 40; i++ {
		k := fmt.Sprint("before-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("during-%d-%d", w, i)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, _, err := c.put(wctx, "id-"+k, k, k)
				cancel()
				if err == nil {
					mu.Lock()
					acked[k] = k
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(200 * time.Millisecond)
	parent, _ := c.nodes[2].st.Descriptor(1)
	child, err := c.nodes[2].st.SplitShard(ctx, 1) // node 2 may not lead: forwarded
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	lower, upper := parent.Halves(1 << 63)
	if child.ID != upper.ID || child.Start != upper.Start || child.End != upper.End || child.Epoch != upper.Epoch {
		t.Fatalf("new shard %+v, want %+v", child, upper)
	}
	for i := 0; i < 20; i++ {
		k := fmt.Sprint("after-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	c.checkSplitAll([]uint64{1, 2, 3}, lower, upper, acked)
	t.Logf("%d writes acknowledged", len(acked))
}

// Dedup stays exact across a split: a write applied by the shard before
// the split, retried under the same request id after it, is answered
// from its record by the half that owns its key now (same version,
// nothing applied twice); another command under that id is refused. A
// write proposed to the old shard after the split applies nothing there.
func TestSplitKeepsDedupExact(t *testing.T) {
	c := newMoveCluster(t, 3)
	ctx := moveCtx(t)
	parent, _ := c.nodes[1].st.Descriptor(1)
	_, upper := parent.Halves(1 << 63)
	k := keyIn(upper, "up-")
	first, sid, err := c.put(ctx, "dup-1", k, "v1")
	if err != nil || sid != 1 || first.Status != wire.StatusOK {
		t.Fatalf("first write: %+v shard %d %v", first, sid, err)
	}
	if _, err := c.nodes[3].st.SplitShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The old shard refuses the key now, applying nothing.
	lead := c.leaderOf(1)
	cmd := wire.Command{RequestID: []byte("late"), Op: wire.OpPut, Key: []byte(k), Value: []byte("late")}
	res, err := lead.ProposeEncoded(ctx, cmd.RequestID, cmd.Key, cmd.Marshal())
	if err != nil || res.Status != wire.StatusWrongShard {
		t.Fatalf("write to the old shard: %+v %v", res, err)
	}
	again, sid, err := c.put(ctx, "dup-1", k, "v1")
	if err != nil || sid != upper.ID || again.Status != wire.StatusOK || again.Version != first.Version {
		t.Fatalf("retry after the split: %+v on shard %d (%v); first %+v", again, sid, err, first)
	}
	reused, _, err := c.put(ctx, "dup-1", k, "other")
	if err != nil || reused.Status != wire.StatusRequestIDReused {
		t.Fatalf("reused id: %+v %v", reused, err)
	}
	// Nothing but the first write is there.
	c.checkSplitAll([]uint64{1, 2, 3}, shard.Descriptor{ID: 1, Start: 0, End: 1 << 63, Epoch: 2}, upper, map[string]string{k: "v1"})
	got, v, _ := c.leaderOf(upper.ID).Get([]byte(k))
	if string(got) != "v1" || v != first.Version {
		t.Fatalf("value %q version %d, want v1 %d", got, v, first.Version)
	}
}

// Crashes around the split: a node down while the split commits applies
// it from its log when it comes back (its new replica catches up from
// the new shard's leader); every node restarted after the split reopens
// both halves from the engine, with their data, and they take writes.
func TestSplitSurvivesRestarts(t *testing.T) {
	c := newMoveCluster(t, 3)
	ctx := moveCtx(t)
	acked := map[string]string{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprint("a-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	parent, _ := c.nodes[1].st.Descriptor(1)
	lower, upper := parent.Halves(1 << 63)
	// Node 3 is down while the split commits and the halves take writes.
	c.stop(3)
	if _, err := c.nodes[1].st.SplitShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprint("b-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	c.start(3, false)
	c.checkSplitAll([]uint64{1, 2, 3}, lower, upper, acked)
	// Every node restarts: both halves reopen from the engine.
	for _, id := range []uint64{1, 2, 3} {
		c.stop(id)
	}
	for _, id := range []uint64{1, 2, 3} {
		c.start(id, false)
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprint("c-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	c.checkSplitAll([]uint64{1, 2, 3}, lower, upper, acked)
	// And the halves split again, each on its own.
	if _, err := c.nodes[2].st.SplitShard(ctx, upper.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[2].st.SplitShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Every node's map covers the ring with the four shards, exactly, once
	// it has applied both splits. (While a replica applies a split, its
	// new half is opened before the old shard narrows: for that moment
	// the view overlaps, which routing tolerates, a stale shard refusing
	// what it no longer owns; a gap would leave tokens with no owner.)
	for _, id := range []uint64{1, 2, 3} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			cover := c.nodes[id].st.Cover()
			err := exactCover(cover, 4)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: cover %+v: %v", id, cover, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// exactCover says how cover fails to be n shards that own the ring
// each token once, in order.
func exactCover(cover []shard.Descriptor, n int) error {
	if len(cover) != n {
		return fmt.Errorf("%d shards, want %d", len(cover), n)
	}
	var next uint64
	for i, d := range cover {
		if d.Start != next || (i == n-1) != (d.End == 0) {
			return fmt.Errorf("a gap or overlap at shard %d", d.ID)
		}
		next = d.End
	}
	return nil
}

// A node down while the split commits and the old shard's log is then
// truncated past it catches up by a snapshot of the narrowed shard and
// never applies the split: the new shard's leader finds the member
// silent and has it create an empty replica, filled by a snapshot; the
// new shard ends with all three replicas holding every acknowledged
// write. A voter's replica is never created while a local replica still
// owns part of the range.
func TestSplitRepairsAReplicaThatMissedIt(t *testing.T) {
	c := newMoveCluster(t, 3)
	ctx := moveCtx(t)
	acked := map[string]string{}
	parent, _ := c.nodes[1].st.Descriptor(1)
	lower, upper := parent.Halves(1 << 63)
	// Refused: node 1's shard 1 still owns the upper half.
	if err := c.nodes[1].st.CreateReplica(upper); err == nil {
		t.Fatal("created a voter replica over a range a local replica owns")
	}
	c.stop(3)
	if _, err := c.nodes[1].st.SplitShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	splitAt := c.leaderOf(1).Applied()
	for i := 0; i < 60; i++ {
		k := fmt.Sprint("x-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	if first, _ := c.leaderOf(1).LogBounds(); first <= splitAt {
		t.Fatalf("the old shard's log was not truncated past the split (first index %d)", first)
	}
	c.start(3, false)
	deadline := time.Now().Add(20 * time.Second)
	for c.nodes[3].st.Replica(upper.ID) == nil {
		if time.Now().After(deadline) {
			t.Fatal("node 3 never got a replica of the new shard")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.checkSplitAll([]uint64{1, 2, 3}, lower, upper, acked)
}

// A shard whose data passes SplitSize on disk is split by its leader
// without being asked, again while a half is still too large; every
// acknowledged write stays readable from the shard that owns it.
func TestSplitBySize(t *testing.T) {
	c := newMoveCluster(t, 3)
	for _, id := range []uint64{1, 2, 3} {
		c.stop(id)
	}
	c.tune = func(cfg *Config) {
		cfg.SplitSize = 256 << 10
		cfg.SplitCheckInterval = 100 * time.Millisecond
	}
	for _, id := range []uint64{1, 2, 3} {
		c.start(id, false)
	}
	ctx := moveCtx(t)
	acked := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				k := fmt.Sprintf("big-%d-%d", w, i)
				mu.Lock()
				b := make([]byte, 900) // incompressible, below the blob-file threshold
				for j := range b {
					b[j] = byte('a' + rng.IntN(26))
				}
				mu.Unlock()
				if _, _, err := c.put(ctx, "id-"+k, k, string(b)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[k] = string(b)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for len(c.nodes[1].st.Cover()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the shard never split by size")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cover := c.nodes[1].st.Cover()
	t.Logf("%d shards after writing %d KiB", len(cover), len(acked)*900>>10)
	for k, v := range acked {
		d, _ := c.nodes[1].st.Route(shard.Token([]byte(k)))
		r := c.leaderOf(d.ID)
		if err := r.WaitApplied(ctx, r.Status().Commit); err != nil {
			t.Fatal(err)
		}
		if got, _, err := r.Get([]byte(k)); err != nil || string(got) != v {
			t.Fatalf("shard %d: %s: %v", d.ID, k, err)
		}
	}
}

// Both halves of a split shard move to a node that held neither (and
// knew the shard only by its bootstrap range): the creation of the old
// shard's narrower replica is accepted, the halves do not overlap on the
// node, and every acknowledged write is on the new members.
func TestSplitThenMoveBothHalves(t *testing.T) {
	c := newMoveCluster(t, 4)
	ctx := moveCtx(t)
	acked := map[string]string{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprint("m-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	upper, err := c.nodes[1].st.SplitShard(ctx, 1) // node 4 does not hear of it
	if err != nil {
		t.Fatal(err)
	}
	// Asked on node 1: node 4 has not heard of the new shard (the
	// coordinator asks its peers first, kv.knowShard).
	for _, id := range []uint64{1, upper.ID} {
		if err := c.nodes[1].st.MoveReplica(ctx, id, 3, 4); err != nil {
			t.Fatalf("move of shard %d: %v", id, err)
		}
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprint("n-", i)
		if _, _, err := c.put(ctx, "id-"+k, k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	// Once every member has applied the moves' last conf changes.
	var lower, up shard.Descriptor
	deadline := time.Now().Add(10 * time.Second)
	for {
		lower, _ = c.nodes[1].st.Descriptor(1)
		up, _ = c.nodes[1].st.Descriptor(upper.ID)
		same := true
		for _, id := range []uint64{2, 4} {
			l, _ := c.nodes[id].st.Descriptor(1)
			u, _ := c.nodes[id].st.Descriptor(upper.ID)
			same = same && l.Epoch == lower.Epoch && u.Epoch == up.Epoch
		}
		if same && !lower.HasReplica(3) && !up.HasReplica(3) {
			break
		}
		if time.Now().After(deadline) {
			for _, id := range []uint64{1, 2, 3, 4} {
				l, _ := c.nodes[id].st.Descriptor(1)
				u, _ := c.nodes[id].st.Descriptor(upper.ID)
				t.Logf("node %d: %+v %+v", id, l, u)
				for _, sid := range []uint64{1, upper.ID} {
					if r := c.nodes[id].st.Replica(sid); r != nil {
						t.Logf("node %d shard %d status %+v", id, sid, r.Status())
					}
				}
			}
			t.Fatalf("members disagree: %+v %+v", lower, up)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.checkSplitAll([]uint64{1, 2, 4}, lower, up, acked)
}
