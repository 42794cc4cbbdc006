package kv_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
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

// Cluster lists the members SetMembers gave, with their states: a member
// added at run time at once, a member left out no more.
func TestClusterListsSetMembers(t *testing.T) {
	c := newCluster(t, 3, 3, replica.Config{})
	n := c.nodes[1]
	n.coord.SetMembers([]kv.Member{
		{ID: 1, PeerAddr: "p1", State: "active"},
		{ID: 2, PeerAddr: "p2", State: "decommissioning"},
		{ID: 3, PeerAddr: "p3", State: "active"},
		{ID: 4, PeerAddr: "p4", HTTPAddr: "h4", State: "active"},
	})
	ci := n.coord.Cluster(context.Background())
	if len(ci.Members) != 4 {
		t.Fatalf("members %+v", ci.Members)
	}
	if m := ci.Members[3]; m.NodeID != 4 || m.HTTPAddr != "h4" || m.State != "active" {
		t.Fatalf("new member %+v", m)
	}
	if m := ci.Members[1]; m.State != "decommissioning" {
		t.Fatalf("member 2 %+v", m)
	}
	n.coord.SetMembers([]kv.Member{{ID: 1, PeerAddr: "p1", State: "active"}, {ID: 3, PeerAddr: "p3", State: "active"}})
	if ci := n.coord.Cluster(context.Background()); len(ci.Members) != 2 {
		t.Fatalf("members after 2 and 4 left: %+v", ci.Members)
	}
}
