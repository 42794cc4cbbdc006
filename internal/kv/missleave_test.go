package kv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/transport"
	"go.etcd.io/raft/v3/raftpb"
)

// dropLeaveJoint drops the messages of shard a.missLeave that carry the
// entry leaving a joint configuration, or any entry after it, and its
// snapshots: the replica applies the joint step and never hears of its
// end (as a node that missed the leader's last messages to it).
func (a *adapter) dropLeaveJoint(envs []transport.Envelope) []transport.Envelope {
	sh := a.missLeave.Load()
	kept := envs[:0:0]
	for _, e := range envs {
		if e.ShardID == sh && a.carriesLeave(e.Msg) {
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

func (a *adapter) carriesLeave(m raftpb.Message) bool {
	if m.Type == raftpb.MsgSnap {
		return true
	}
	for _, ent := range m.Entries {
		if at := a.leaveAt.Load(); at != 0 && ent.Index >= at {
			return true
		}
		if ent.Type != raftpb.EntryConfChangeV2 {
			continue
		}
		var cc raftpb.ConfChangeV2
		if err := cc.Unmarshal(ent.Data); err == nil && len(cc.Changes) == 0 {
			a.leaveAt.CompareAndSwap(0, ent.Index)
			return true
		}
	}
	return false
}

// A move's source that applied the joint step and missed its end hears
// from no leader again (the leader sends nothing to a node outside its
// configuration) until the store collects the replica. Its node still
// serves the shard: the request goes to the shard's members, as for a
// removed replica, instead of being answered "no leader".
func TestMoveSourceThatMissedTheEndServes(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	k := keyOf(c.m, 1, "k-")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v1"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	src := c.nodes[1].st.Replica(1)
	c.nodes[1].ad.missLeave.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.nodes[4].coord.MoveReplica(ctx, 1, 1, 4); err != nil {
		t.Fatal(err)
	}
	if c.nodes[1].ad.leaveAt.Load() == 0 {
		t.Fatal("node 1 was sent no entry leaving the joint step: the test proves nothing")
	}
	eventually(t, 10*time.Second, func() error {
		if !src.Leaving() || src.Removed() {
			return errors.New("node 1's replica is not left in the joint step")
		}
		if !src.LeaderLost() {
			return errors.New("node 1's replica has not lost its leader yet")
		}
		return nil
	})
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v2"), kv.WriteOptions{}); err != nil {
		t.Fatalf("put through the node whose replica missed the move's end: %v", err)
	}
	got, err := c.nodes[1].coord.Get(ctx5(t), k, kv.ReadOptions{})
	if err != nil || string(got.Data) != "v2" {
		t.Fatalf("get through that node: %q %v, want v2", got.Data, err)
	}
}
