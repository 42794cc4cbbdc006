package kv_test

import (
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// A serializable read is answered while two of its shard's three
// replicas hang (paused nodes): each attempt on a replica is bounded, as
// on the leader path, and the read goes on to the one that answers
// instead of waiting out its deadline on the first it asked. Each
// replica in turn is the one that answers.
func TestSerializableReadPassesOverAHungReplica(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	d, _ := c.nodes[1].st.Descriptor(1)
	k := keyOf(c.m, 1, "hang-")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{Ack: 3, From: 3}); err != nil {
		t.Fatal(err)
	}
	// Ack 3 waits for the write to be durable on all three, not applied:
	// each replica applies it before it is asked alone.
	var applied uint64
	for _, n := range d.Replicas {
		applied = max(applied, c.nodes[n].st.Replica(1).Applied())
	}
	for _, n := range d.Replicas {
		if err := c.nodes[n].st.Replica(1).WaitApplied(ctx5(t), applied); err != nil {
			t.Fatalf("node %d applying %d: %v", n, applied, err)
		}
	}
	via := c.nodes[4] // holds no replica of shard 1
	if via.st.Replica(1) != nil {
		t.Fatal("node 4 holds a replica of shard 1")
	}
	for _, up := range d.Replicas {
		for _, n := range d.Replicas {
			c.nodes[n].ad.hang.Store(n != up)
		}
		v, err := via.coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil || string(v.Data) != "v" {
			t.Errorf("serializable read with only node %d of %v answering: %q %v", up, d.Replicas, v.Data, err)
		}
	}
	for _, n := range d.Replicas {
		c.nodes[n].ad.hang.Store(false)
	}
}
