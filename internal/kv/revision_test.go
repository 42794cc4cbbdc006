package kv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// A read tells the shard's applied index it was served at (Revision),
// found or not, through every path: the local replica, its leader, and
// another node's replica (node 4 holds none of shard 1). A later write of
// the key gets a higher version, so a watch from Revision+1 misses none.
func TestReadTellsItsRevision(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	k := keyOf(c.m, 1, "rev-")
	ver, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{Ack: 3, From: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Ack 3 waits for the write to be durable on all three replicas, not
	// applied, and a serializable read (node 4's, or one a node sends to
	// the replica with the shortest queue) may be served by any of them:
	// each applies the write before the reads.
	d, _ := c.nodes[1].st.Descriptor(1)
	for _, n := range d.Replicas {
		if err := c.nodes[n].st.Replica(1).WaitApplied(ctx5(t), ver); err != nil {
			t.Fatalf("node %d applying %d: %v", n, ver, err)
		}
	}
	for _, n := range []uint64{1, 2, 4} {
		for _, cons := range []kv.Consistency{kv.Linearizable, kv.Serializable} {
			v, err := c.nodes[n].coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: cons})
			if err != nil || v.Version != ver || v.Revision < ver {
				t.Errorf("node %d, %v: read of a key written at %d: version %d, revision %d, %v", n, cons, ver, v.Version, v.Revision, err)
			}
			// A key never written before (a serializable read may go
			// to a replica behind the last iteration's writes).
			absent := keyOf(c.m, 1, fmt.Sprintf("rev-absent-%d-%d-", n, cons))
			v, err = c.nodes[n].coord.Get(ctx5(t), absent, kv.ReadOptions{Consistency: cons})
			if !errors.Is(err, kv.ErrNotFound) || v.Revision < ver && cons == kv.Linearizable || v.Revision == 0 {
				t.Errorf("node %d, %v: read of an absent key after a write at %d: revision %d, %v", n, cons, ver, v.Revision, err)
			}
			if cons != kv.Linearizable {
				continue
			}
			later, _, err := c.nodes[n].coord.Put(ctx5(t), absent, []byte("x"), kv.WriteOptions{})
			if err != nil || later <= v.Revision {
				t.Errorf("node %d: a write after a read at revision %d has version %d, %v", n, v.Revision, later, err)
			}
		}
	}
}

// A delete of an absent key answers ErrNotFound and its own log index
// (through every path: the leader's node, a follower's, a node holding no
// replica): above every change before it, below every change after it.
func TestDeleteOfAbsentKeyTellsItsRevision(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	absent := keyOf(c.m, 1, "del-absent-")
	for _, n := range []uint64{1, 2, 4} {
		ver, _, err := c.nodes[n].coord.Put(ctx5(t), keyOf(c.m, 1, "del-other-"), []byte("v"), kv.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := c.nodes[n].coord.Delete(ctx5(t), absent, kv.WriteOptions{})
		if !errors.Is(err, kv.ErrNotFound) || rev <= ver {
			t.Fatalf("node %d: delete of an absent key after a write at %d: revision %d, %v; want ErrNotFound above %d", n, ver, rev, err, ver)
		}
		later, _, err := c.nodes[n].coord.Put(ctx5(t), absent, []byte("x"), kv.WriteOptions{})
		if err != nil || later <= rev {
			t.Fatalf("node %d: a write after a delete at revision %d has version %d, %v", n, rev, later, err)
		}
		if _, err := c.nodes[n].coord.Delete(ctx5(t), absent, kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
