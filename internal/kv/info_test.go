package kv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
)

// With more nodes than replicas, every node's Cluster names the leader of
// every shard (those it holds no replica of too, asked from their
// replicas) and every member's HTTP address.
func TestClusterFromANodeWithoutEveryShard(t *testing.T) {
	c := newCluster(t, 5, 5, replica.Config{})
	for id, n := range c.nodes {
		eventually(t, 10*time.Second, func() error {
			ci := n.coord.Cluster(context.Background())
			foreign := 0
			for _, s := range ci.Shards {
				if !slices.Contains(s.Replicas, id) {
					foreign++
				}
				if s.Leader == 0 || !slices.Contains(s.Replicas, s.Leader) {
					return fmt.Errorf("node %d: shard %d: leader %d of replicas %v", id, s.ID, s.Leader, s.Replicas)
				}
				if want := c.nodes[s.Leader].st.Replica(s.ID).Leader(); want != s.Leader {
					return fmt.Errorf("node %d: shard %d: leader %d, its leader says %d", id, s.ID, s.Leader, want)
				}
			}
			if foreign == 0 {
				t.Fatalf("node %d holds every shard: the test proves nothing", id)
			}
			if len(ci.Members) != 5 {
				return fmt.Errorf("node %d: %d members", id, len(ci.Members))
			}
			for _, m := range ci.Members {
				if m.HTTPAddr != fmt.Sprint("http-", m.NodeID) {
					return fmt.Errorf("node %d: member %d http_addr %q", id, m.NodeID, m.HTTPAddr)
				}
			}
			return nil
		})
	}
	// A node gone: the others still answer, with what they know.
	c.stop(5)
	ci := c.nodes[1].coord.Cluster(context.Background())
	if len(ci.Members) != 5 || ci.Members[4].HTTPAddr != "http-5" {
		t.Fatalf("after node 5 left: members %+v", ci.Members)
	}
}
