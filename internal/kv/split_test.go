package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// Splits under writes sent to every node's coordinator, asked on a node
// that holds no replica of the shard: no write fails (requests in flight
// are re-routed to the half that owns their key, also on the node that
// must learn of the split from others), every acknowledged write reads
// back from every node, and a listing from that node sees every key once.
func TestSplitUnderLoadThroughCoordinators(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	if c.nodes[4].st.Replica(1) != nil {
		t.Fatal("node 4 holds a replica of shard 1: the test needs one that does not")
	}
	stopWriters := loadWriters(c, []uint64{1, 2, 3, 4}, 1)
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lower, upper, err := c.nodes[4].coord.SplitShard(ctx, 1)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	if lower.ID != 1 || lower.End != upper.Start || upper.ID != upper.Start || lower.Epoch != upper.Epoch {
		t.Fatalf("halves %+v %+v", lower, upper)
	}
	time.Sleep(300 * time.Millisecond)
	// The upper half splits again, asked on a node that holds it.
	if _, _, err := c.nodes[2].coord.SplitShard(ctx, upper.ID); err != nil {
		t.Fatalf("second split: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	acked, failures := stopWriters()
	if len(failures) > 0 {
		t.Fatalf("%d writes failed during the splits, first: %v", len(failures), failures[0])
	}
	if len(acked) < 20 {
		t.Fatalf("only %d writes made it: the test proves little", len(acked))
	}
	for id, n := range c.nodes {
		for k, v := range acked {
			got, err := n.coord.Get(ctx5(t), []byte(k), kv.ReadOptions{})
			if err != nil || string(got.Data) != v {
				t.Fatalf("node %d: %s = %q, %v", id, k, got.Data, err)
			}
			got, err = n.coord.Get(ctx5(t), []byte(k), kv.ReadOptions{Consistency: kv.Serializable})
			if err != nil {
				t.Fatalf("node %d: serializable %s: %v", id, k, err)
			}
		}
	}
	// A listing on node 4 sees every key once, the split shards' included.
	seen := map[string]int{}
	var after []byte
	for {
		page, err := c.nodes[4].coord.List(ctx5(t), kv.ListOptions{Prefix: []byte("w"), After: after, Limit: 1000, KeysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[string(e.Key)]++
		}
		if !page.More {
			break
		}
		after = page.Last
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Fatalf("listing saw %s %d times", k, seen[k])
		}
	}
	ci := c.nodes[4].coord.Cluster(ctx5(t))
	if len(ci.Shards) != 6 {
		t.Fatalf("node 4 lists %d shards, want 6: %+v", len(ci.Shards), ci.Shards)
	}
	t.Logf("%d writes acknowledged through two splits", len(acked))
}
