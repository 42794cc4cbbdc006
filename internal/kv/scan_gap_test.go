package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// A node that holds no replica of a shard that split learns the shard's
// new, narrower range from a wrong-shard answer to a point read, but not
// the new shard that took the upper half. A listing through that node
// must still see every key (or fail), never silently leave out the upper
// half because the cover it plans has a gap.
func TestListingAfterSplitLearnedHalfway(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	if c.nodes[4].st.Replica(1) != nil {
		t.Fatal("node 4 holds a replica of shard 1")
	}
	var keys [][]byte
	for i := 0; i < 40; i++ {
		k := keyOf(c.m, 1, fmt.Sprintf("g%02d-", i))
		keys = append(keys, k)
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, k, kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lower, upper, err := c.nodes[1].coord.SplitShard(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var lowKey []byte
	nUpper := 0
	for _, k := range keys {
		if lower.Contains(shard.Token(k)) {
			lowKey = k
		} else {
			nUpper++
		}
	}
	if lowKey == nil || nUpper == 0 {
		t.Fatalf("keys do not straddle the split (%d upper)", nUpper)
	}
	// Wait until every replica of shard 1 has applied the split.
	eventually(t, 10*time.Second, func() error {
		for _, id := range lower.Replicas {
			if d := c.nodes[id].st.Replica(1).Desc(); d.Epoch != lower.Epoch {
				return fmt.Errorf("node %d at epoch %d", id, d.Epoch)
			}
		}
		return nil
	})
	// A point read through node 4 of a key of the lower half: refused
	// (epoch), node 4 learns shard 1's narrower range, and the read is
	// answered.
	if v, err := c.nodes[4].coord.Get(ctx5(t), lowKey, kv.ReadOptions{}); err != nil || string(v.Data) != string(lowKey) {
		t.Fatalf("read %s via node 4: %q %v", lowKey, v.Data, err)
	}
	_, knowsUpper := c.nodes[4].st.Descriptor(upper.ID)
	t.Logf("node 4 knows shard 1 as %+v; knows shard %d: %v", func() shard.Descriptor { d, _ := c.nodes[4].st.Descriptor(1); return d }(), upper.ID, knowsUpper)

	seen := map[string]bool{}
	var after []byte
	for {
		page, err := c.nodes[4].coord.List(ctx5(t), kv.ListOptions{Prefix: []byte("g"), After: after, Limit: 1000, KeysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			seen[string(e.Key)] = true
		}
		if !page.More {
			break
		}
		after = page.Last
	}
	missing := 0
	for _, k := range keys {
		if !seen[string(k)] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("the listing through node 4 left out %d of %d keys (%d keys are in the upper half), without an error", missing, len(keys), nUpper)
	}
}
