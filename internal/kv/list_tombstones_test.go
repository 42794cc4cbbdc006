package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// A listing over many deleted keys (tombstones not yet compacted away)
// whose nodes end their scans early — after a few steps, tombstones
// counted, or at once, their time being up — still answers every live
// key exactly once, in order, through a node holding every shard and
// through one that asks other nodes for some.
func TestListingOverDeletedKeysWithScansCutShort(t *testing.T) {
	restore := kv.SetScanBudget(50000, 0.5)
	t.Cleanup(func() { restore() })
	c := newCluster(t, 4, 4, replica.Config{})
	var live []string
	for i := range 240 {
		k := []byte(fmt.Sprintf("tomb%03d", i))
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%9 == 4 {
			live = append(live, string(k))
			continue
		}
		if _, err := c.nodes[1].coord.Delete(ctx5(t), k, kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []struct {
		name      string
		steps     int
		timeShare float64
	}{
		{"a few steps", 5, 0.5},
		{"no time", 50000, 0},
	} {
		kv.SetScanBudget(b.steps, b.timeShare)
		for _, node := range []uint64{1, 4} {
			for _, limit := range []int{1000, 3} {
				var keys []string
				var after []byte
				pages := 0
				for {
					page, err := c.nodes[node].coord.List(ctx5(t), kv.ListOptions{Prefix: []byte("tomb"), After: after, Limit: limit})
					if err != nil {
						t.Fatalf("%s, node %d, limit %d: %v", b.name, node, limit, err)
					}
					for _, e := range page.Entries {
						keys = append(keys, string(e.Key))
					}
					if pages++; !page.More || pages > 1000 {
						break
					}
					after = page.Last
				}
				if !slices.Equal(keys, live) {
					t.Fatalf("%s, node %d, limit %d: listed %q in %d pages, want %q", b.name, node, limit, keys, pages, live)
				}
				// Pages of up to 16 rounds: nodes answering a few
				// entries each cannot fill the first.
				if limit == 1000 && pages < 2 {
					t.Fatalf("%s, node %d: listed in one page: the scans were not cut short", b.name, node)
				}
			}
		}
	}
}
