package integration

import (
	"fmt"
	"strings"
	"testing"
)

// Defect "cairn demo --nodes 5 shuts itself down": with more nodes than
// replicas, a node answers /v1/cluster with every shard's leader (also of
// shards it holds no replica of) and every member's HTTP address.
func TestClusterViewWithMoreNodesThanReplicas(t *testing.T) {
	c := newCluster(t, 5) // replication 3, 16 shards
	for i := 1; i <= 5; i++ {
		ci, err := c.clusterInfo(i)
		if err != nil {
			t.Fatal(err)
		}
		if len(ci.Shards) != 16 || len(ci.Members) != 5 {
			t.Fatalf("node %d: %d shards, %d members", i, len(ci.Shards), len(ci.Members))
		}
		foreign := 0
		for _, s := range ci.Shards {
			if len(s.Replicas) != 3 || !s.HasReplica(s.Leader) {
				t.Fatalf("node %d: shard %d: leader %d, replicas %v", i, s.ID, s.Leader, s.Replicas)
			}
			if !s.HasReplica(uint64(i)) {
				foreign++
			}
		}
		if foreign == 0 {
			t.Fatalf("node %d holds a replica of every shard: the test proves nothing", i)
		}
		for _, m := range ci.Members {
			if want := c.lc.Node(int(m.NodeID)).HTTPAddr; m.HTTPAddr != want {
				t.Fatalf("node %d: member %d http_addr %q, want %q", i, m.NodeID, m.HTTPAddr, want)
			}
		}
	}
}

func TestDemoFiveNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	p := freeBase(t, 5)
	d := startDemo(t, "--nodes", "5", "--http-port", fmt.Sprint(p), "--data-dir", t.TempDir())
	if !strings.Contains(d.out(), "5 nodes") || !strings.Contains(d.out(), fmt.Sprintf("http://127.0.0.1:%d", p+4)) {
		t.Fatalf("banner of a 5-node demo:\n%s", d.out())
	}
	d.terminate(t)
}
