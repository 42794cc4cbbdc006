package kv_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// Paging through a listing while a shard splits and a replica moves
// between pages, and keys are written and deleted between pages: every
// key that existed throughout is listed exactly once, in order.
func TestListPagingAcrossSplitAndMove(t *testing.T) {
	for _, cons := range []kv.Consistency{kv.Linearizable, kv.Serializable} {
		t.Run(fmt.Sprint(cons), func(t *testing.T) {
			c := newCluster(t, 4, 4, replica.Config{})
			var stable []string
			for i := 0; i < 200; i++ {
				k := fmt.Sprintf("k%04d", i*2)
				stable = append(stable, k)
				if _, _, err := c.nodes[uint64(i%4+1)].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), kv.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			sort.Strings(stable)
			var gone []string
			for i := 0; i < 200; i += 7 {
				gone = append(gone, fmt.Sprintf("k%04d", i*2+1))
			}
			for _, k := range gone {
				if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), kv.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 5*time.Second, func() error {
				for _, n := range c.nodes {
					p, err := n.coord.List(ctx5(t), kv.ListOptions{Limit: 1000, KeysOnly: true, Consistency: kv.Serializable})
					if err != nil {
						return err
					}
					if len(p.Entries) != len(stable)+len(gone) {
						return fmt.Errorf("node %d: %d keys", n.id, len(p.Entries))
					}
				}
				return nil
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var got []string
			seen := map[string]bool{}
			opts := kv.ListOptions{Limit: 9, Consistency: cons}
			for page := 0; ; page++ {
				p, err := c.nodes[4].coord.List(ctx5(t), opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range p.Entries {
					k := string(e.Key)
					if seen[k] {
						t.Fatalf("page %d: %s listed again", page, k)
					}
					if len(got) > 0 && k <= got[len(got)-1] {
						t.Fatalf("page %d: %s after %s", page, k, got[len(got)-1])
					}
					seen[k] = true
					got = append(got, k)
				}
				switch page {
				case 3:
					if _, _, err := c.nodes[1].coord.SplitShard(ctx, 1); err != nil {
						t.Fatal(err)
					}
				case 6:
					d, _ := c.nodes[1].st.Descriptor(2)
					to := uint64(0)
					for id := range c.nodes {
						if !slices.Contains(d.Replicas, id) {
							to = id
						}
					}
					if _, err := c.nodes[1].coord.MoveReplica(ctx, 2, d.Replicas[0], to); err != nil {
						t.Fatal(err)
					}
				case 9:
					if _, _, err := c.nodes[2].coord.SplitShard(ctx, 3); err != nil {
						t.Fatal(err)
					}
				}
				if page%2 == 0 {
					for _, k := range gone {
						if _, err := c.nodes[uint64(page%4+1)].coord.Delete(ctx5(t), []byte(k), kv.WriteOptions{}); err == nil {
							break
						}
					}
				}
				if !p.More {
					break
				}
				opts.After = p.Last
			}
			var stableGot []string
			for _, k := range got {
				if slices.Contains(stable, k) {
					stableGot = append(stableGot, k)
				}
			}
			if !slices.Equal(stableGot, stable) {
				t.Fatalf("listed %d of the %d keys that existed throughout", len(stableGot), len(stable))
			}
		})
	}
}
