package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// waitDesc waits until node id's descriptor of shard 1 satisfies ok.
func (c *grpcCluster) waitDesc(id uint64, what string, ok func(shard.Descriptor) bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, _ := c.nodes[id].st.Descriptor(1)
		if ok(d) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: descriptor %+v, want %s", id, d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitTombstone waits until n's engine holds shard 1's tombstone (the
// replica leaves the store a moment before its data is deleted).
func (c *grpcCluster) waitTombstone(n *grpcNode) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := n.st.tombstone(1); ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("no tombstone")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func moveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// writeKeys writes n keys with prefix and records them in acked.
func writeKeys(t *testing.T, c *grpcCluster, prefix string, n int, acked map[string]string) {
	for i := 0; i < n; i++ {
		k := fmt.Sprint(prefix, i)
		if err := c.write(moveCtx(t), k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
}

// A learner added for reads only stays a learner, holds the data, and
// is removed (its data deleted) by RemoveReplica.
func TestAddLearnerThenRemove(t *testing.T) {
	c := newMoveCluster(t, 4)
	acked := map[string]string{}
	writeKeys(t, c, "k", 30, acked)
	if err := c.nodes[2].st.AddReplica(moveCtx(t), 1, 4, true); err != nil {
		t.Fatal(err)
	}
	c.waitDesc(1, "a learner", func(d shard.Descriptor) bool { return d.IsLearner(4) && !d.IsVoter(4) && d.Epoch == 2 })
	writeKeys(t, c, "more", 10, acked)
	c.checkAll([]uint64{1, 2, 3, 4}, acked)
	if err := c.nodes[4].st.RemoveReplica(moveCtx(t), 1, 4); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.nodes[4].st.Replica(1) != nil {
		if time.Now().After(deadline) {
			t.Fatal("removed learner still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.waitDesc(1, "the learner removed", func(d shard.Descriptor) bool { return !d.HasReplica(4) && d.Epoch == 3 })
}

// A move interrupted after its first step (the learner added, then the
// leader's node restarted) is finished by MoveReplica; every write made
// before, in between and after is on the new replicas.
func TestMoveResumesAfterLearnerStep(t *testing.T) {
	c := newMoveCluster(t, 4)
	acked := map[string]string{}
	writeKeys(t, c, "a", 20, acked)
	if err := c.nodes[4].st.AddReplica(moveCtx(t), 1, 4, true); err != nil {
		t.Fatal(err)
	}
	var leadID uint64
	lead := c.shardLeader()
	for id, n := range c.nodes {
		if n == lead {
			leadID = id
		}
	}
	c.stop(leadID)
	writeKeys(t, c, "b", 10, acked)
	c.start(leadID, false)
	from := uint64(3)
	if leadID == 3 {
		from = 2
	}
	if err := c.nodes[4].st.MoveReplica(moveCtx(t), 1, from, 4); err != nil {
		t.Fatal(err)
	}
	writeKeys(t, c, "c", 10, acked)
	var members []uint64
	for _, id := range []uint64{1, 2, 3, 4} {
		if id != from {
			members = append(members, id)
		}
	}
	c.checkAll(members, acked)
}

// A move left in an explicit joint configuration (as a crash between
// entering and leaving it would leave one that raft does not leave by
// itself), with every node restarted, is finished by MoveReplica: the
// shard had a quorum in both configurations throughout.
func TestMoveResumesFromJointAfterRestart(t *testing.T) {
	c := newMoveCluster(t, 4)
	acked := map[string]string{}
	writeKeys(t, c, "a", 20, acked)
	if err := c.nodes[1].st.AddReplica(moveCtx(t), 1, 4, true); err != nil {
		t.Fatal(err)
	}
	c.checkAll([]uint64{4}, acked)
	lead := c.shardLeader()
	r := lead.st.Replica(1)
	from := uint64(3)
	if lead == c.nodes[3] {
		from = 2
	}
	cc := raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointExplicit, Changes: []raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddNode, NodeID: 4}, {Type: raftpb.ConfChangeRemoveNode, NodeID: from}}}
	changed := r.DescChanged()
	if err := r.ProposeConfChange(moveCtx(t), cc, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("joint step not applied")
	}
	if cfg := r.Status().Config; len(cfg.Voters[1]) == 0 || cfg.AutoLeave {
		t.Fatalf("not in an explicit joint configuration: %s", cfg)
	}
	writeKeys(t, c, "joint", 10, acked)
	for id := uint64(1); id <= 4; id++ {
		c.stop(id)
	}
	for id := uint64(1); id <= 4; id++ {
		c.start(id, false)
	}
	writeKeys(t, c, "restarted", 10, acked)
	if err := c.nodes[from].st.MoveReplica(moveCtx(t), 1, from, 4); err != nil {
		t.Fatal(err)
	}
	writeKeys(t, c, "after", 10, acked)
	var members []uint64
	for _, id := range []uint64{1, 2, 3, 4} {
		if id != from {
			members = append(members, id)
		}
	}
	c.checkAll(members, acked)
	for _, id := range members {
		c.waitDesc(id, "the move done", func(d shard.Descriptor) bool {
			return !d.HasReplica(from) && d.IsVoter(4) && len(d.Replicas) == 3
		})
	}
}

// A move whose source is down finishes without it; when the source comes
// back, its replica finds out from the members that it was removed and
// deletes itself.
func TestMoveFromDeadNodeThenOrphanRemoved(t *testing.T) {
	c := newMoveCluster(t, 4)
	acked := map[string]string{}
	writeKeys(t, c, "a", 20, acked)
	lead := c.shardLeader()
	var from uint64
	for _, id := range []uint64{1, 2, 3} {
		if c.nodes[id] != lead {
			from = id
			break
		}
	}
	c.stop(from)
	writeKeys(t, c, "b", 10, acked)
	if err := lead.st.MoveReplica(moveCtx(t), 1, from, 4); err != nil {
		t.Fatal(err)
	}
	writeKeys(t, c, "c", 10, acked)
	var members []uint64
	for _, id := range []uint64{1, 2, 3, 4} {
		if id != from {
			members = append(members, id)
		}
	}
	c.checkAll(members, acked)
	c.start(from, false)
	old := c.nodes[from]
	if old.st.Replica(1) == nil {
		t.Fatal("the source's replica is gone before it could learn anything")
	}
	deadline := time.Now().Add(20 * time.Second)
	for old.st.Replica(1) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the orphan replica was not removed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.waitTombstone(old)
	ds, de := storage.DataSpan(0, 0)
	it, err := old.eng.NewIter(ds, de)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("node %d still holds key %q", from, it.Key())
	}
}
