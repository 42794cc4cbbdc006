package kv_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// A page of large values holds at most kv.MaxPageBytes of keys and values,
// unless a single entry is larger (it is then answered alone), whichever
// nodes the coordinator asks: a node stops before an entry that would take
// its answer over its share, and the coordinator before one that would
// take the page over the bound. Paging still returns every key once, in
// order. Four nodes and replication 3: no node holds every shard, so a
// page is scattered over several nodes, each answering one entry at least.
// (A slower tick: the writes are large, and the race detector slow.)
func TestListPageBytesBounded(t *testing.T) {
	c := newClusterTick(t, 4, 4, replica.Config{}, 50*time.Millisecond, 0)
	sizes := map[string]int{"m/": 3 << 19, "l/": 3 << 20} // 1.5 MiB, 3 MiB
	want := map[string][]string{}
	i := 0
	for prefix, size := range sizes {
		for j := 0; j < 4; j++ {
			k := fmt.Sprintf("%s%02d", prefix, j)
			v := bytes.Repeat([]byte{byte('a' + j)}, size)
			eventually(t, 20*time.Second, func() error {
				_, _, err := c.nodes[uint64(i%4+1)].coord.Put(ctx5(t), []byte(k), v, kv.WriteOptions{})
				return err
			})
			i++
			want[prefix] = append(want[prefix], k)
		}
	}
	for _, n := range c.nodes {
		for prefix, size := range sizes {
			var got []string
			opts := kv.ListOptions{Prefix: []byte(prefix), Limit: kv.MaxListLimit}
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("listing does not end")
				}
				p, err := n.coord.List(ctx5(t), opts)
				if err != nil {
					t.Fatal(err)
				}
				total := 0
				for _, e := range p.Entries {
					if len(e.Value) != size {
						t.Fatalf("node %d: %s has %d bytes, want %d", n.id, e.Key, len(e.Value), size)
					}
					total += len(e.Key) + len(e.Value)
					got = append(got, string(e.Key))
				}
				if len(p.Entries) > 1 && total > kv.MaxPageBytes {
					t.Fatalf("node %d, prefix %s: a page of %d entries holds %d bytes, over the %d bound", n.id, prefix, len(p.Entries), total, kv.MaxPageBytes)
				}
				if !p.More {
					break
				}
				opts.After = p.Last
			}
			if !slices.Equal(got, want[prefix]) {
				t.Fatalf("node %d, prefix %s: listed %v, want %v", n.id, prefix, got, want[prefix])
			}
		}
	}
}
