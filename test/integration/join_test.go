package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// extraNode is a node started outside the launcher's cluster (a newcomer).
type extraNode struct {
	id                 int
	httpAddr, peerAddr string
	dir, logPath       string
	proc               *launcher.Process
}

func newExtraNode(t *testing.T, id int) *extraNode {
	t.Helper()
	addrs, err := launcher.FreeAddrs([]string{"127.0.0.1", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &extraNode{id: id, httpAddr: addrs[0], peerAddr: addrs[1], dir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "node.log")}
}

func (n *extraNode) url() string { return "http://" + n.httpAddr }

// start runs `cairn serve` for the node with extra flags (e.g. --join).
func (n *extraNode) start(t *testing.T, extra ...string) {
	t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--node-id", fmt.Sprint(n.id), "--http-addr", n.httpAddr,
		"--peer-addr", n.peerAddr, "--data-dir", n.dir}, extra...)
	fmt.Fprintf(logf, "=== test: %s\n", strings.Join(args, " "))
	p, err := launcher.StartProcess(binary, args, logf, sysProcAttr())
	if err != nil {
		logf.Close()
		t.Fatal(err)
	}
	n.proc = p
	t.Cleanup(func() {
		p.Kill()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(n.logPath)
			t.Logf("--- extra node %d log tail ---\n%s", n.id, tail(string(b), 40))
		}
	})
}

// waitUp waits until the node answers GET /v1/status.
func (n *extraNode) waitUp(t *testing.T) {
	t.Helper()
	eventually(t, readyTimeout, func() string {
		if !n.proc.Running() {
			t.Fatalf("node %d exited: %v", n.id, n.proc.ExitErr())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := client.NewAdmin(n.url(), nil).Status(ctx); err != nil {
			return err.Error()
		}
		return ""
	})
}

// exitsWith waits for the node to exit with an error whose log names want.
func (n *extraNode) exitsWith(t *testing.T, want string) {
	t.Helper()
	select {
	case <-n.proc.Done():
	case <-time.After(90 * time.Second):
		t.Fatalf("node %d did not exit", n.id)
	}
	if n.proc.ExitErr() == nil {
		t.Fatalf("node %d exited with status 0, want a refusal", n.id)
	}
	b, _ := os.ReadFile(n.logPath)
	if !strings.Contains(string(b), want) {
		t.Fatalf("node %d's log does not say %q:\n%s", n.id, want, tail(string(b), 20))
	}
}

func hasMember(ci client.ClusterInfo, id uint64) bool {
	for _, m := range ci.Members {
		if m.NodeID == id {
			return true
		}
	}
	return false
}

// A 4th node joins a running 3-node cluster: every node lists it, it
// serves reads and writes, it restarts without --join, and its id cannot
// be taken by another node; once declared dead it exits and is refused.
func TestJoinAddsANode(t *testing.T) {
	c := newCluster(t, 3)
	// Data written before the join, read through the newcomer after.
	keys := c.keysPerShard("before-join", 1)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(1, k, ""), []byte("v-"+k)); r.code != 201 && r.code != 200 {
			t.Fatalf("PUT %s: %s", k, r)
		}
	}
	n4 := newExtraNode(t, 4)
	n4.start(t, "--join", c.url(2)+","+c.url(1))
	n4.waitUp(t)
	// The node that admitted it lists it at once; every node soon.
	ci, err := c.lc.Admin(2).Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !hasMember(ci, 4) {
		t.Fatalf("node 2 (which admitted node 4) does not list it: %+v", ci.Members)
	}
	for _, base := range []string{c.url(1), c.url(3), n4.url()} {
		eventually(t, 10*time.Second, func() string {
			ci, err := client.NewAdmin(base, nil).Cluster(context.Background())
			if err != nil {
				return err.Error()
			}
			if !hasMember(ci, 4) {
				return fmt.Sprintf("%s lists members %+v", base, ci.Members)
			}
			return ""
		})
	}
	for _, k := range keys {
		r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k), nil)
		if r.code != 200 || r.body != "v-"+k {
			t.Fatalf("GET %s through node 4: %s", k, r)
		}
	}
	if r := c.do("PUT", n4.url()+"/v1/kv/after-join", []byte("x")); r.code != 201 {
		t.Fatalf("PUT through node 4: %s", r)
	}
	if r := c.do("GET", c.url(3)+"/v1/kv/after-join", nil); r.code != 200 || r.body != "x" {
		t.Fatalf("GET after-join through node 3: %s", r)
	}

	// A restart needs no --join: the node persisted what it learned.
	if err := n4.proc.Stop(exitTimeout); err != nil {
		t.Fatalf("stopping node 4: %v", err)
	}
	n4.start(t)
	n4.waitUp(t)
	if r := c.do("GET", n4.url()+"/v1/kv/after-join", nil); r.code != 200 {
		t.Fatalf("GET through the restarted node 4: %s", r)
	}

	// Its id, with other addresses, is refused.
	imp := newExtraNode(t, 4)
	imp.start(t, "--join", c.url(1))
	imp.exitsWith(t, "node id in use")

	moveReplicasOnto(t, c, n4, keys)

	// Declared dead, node 4 leaves, and neither it nor its id comes back.
	a := c.lc.Admin(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := a.RemoveDead(ctx, 4); err != nil || m.State != "dead" {
		t.Fatalf("remove 4 --dead: %+v %v", m, err)
	}
	n4.exitsWith(t, "removed from the cluster")
	n4.start(t)
	n4.exitsWith(t, "cannot rejoin")
	again := newExtraNode(t, 4)
	again.start(t, "--join", c.url(3))
	again.exitsWith(t, "never reused")
	nodes, err := a.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.UsedIDs) != 4 || len(nodes.Members) != 4 {
		t.Fatalf("membership after the removal: %+v", nodes)
	}
}

// moveReplicasOnto checks that the balancer moves replicas onto the new
// node, when this build's nodes can move replicas (POST
// /v1/admin/shards/{id}/move exists); otherwise it logs and returns.
func moveReplicasOnto(t *testing.T, c *cluster, n4 *extraNode, keys []string) {
	t.Helper()
	if !canMoveReplicas(c) {
		t.Log("this build cannot move replicas: the balancer's moves onto node 4 are not checked")
		return
	}
	eventually(t, 2*time.Minute, func() string {
		ci, err := c.clusterInfo(1)
		if err != nil {
			return err.Error()
		}
		held := 0
		for _, s := range ci.Shards {
			if s.HasReplica(4) {
				held++
			}
		}
		if held < len(ci.Shards)*3/4/2 {
			return fmt.Sprintf("node 4 holds %d of %d replicas", held, len(ci.Shards)*3)
		}
		return ""
	})
	for _, k := range keys {
		r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k)+"?consistency=serializable", nil)
		if r.code != 200 && r.code != 404 {
			t.Fatalf("serializable GET %s on node 4: %s", k, r)
		}
	}
}

// canMoveReplicas reports whether this build's nodes move replicas (POST
// /v1/admin/shards/{id}/move exists).
func canMoveReplicas(c *cluster) bool {
	r := c.do("POST", c.url(1)+"/v1/admin/shards/1/move", nil)
	return !(r.code == 404 && strings.Contains(r.body, "no such path"))
}

// A joined node takes replicas, then drains them back when decommissioned,
// is marked removed and exits; every key stays readable.
func TestDecommissionDrainsAJoinedNode(t *testing.T) {
	c := newCluster(t, 3)
	if !canMoveReplicas(c) {
		t.Skip("this build cannot move replicas")
	}
	keys := c.keysPerShard("decom", 2)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(1, k, ""), []byte("v-"+k)); r.code != 201 && r.code != 200 {
			t.Fatalf("PUT %s: %s", k, r)
		}
	}
	n4 := newExtraNode(t, 4)
	n4.start(t, "--join", c.url(1))
	n4.waitUp(t)
	moveReplicasOnto(t, c, n4, keys)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := c.lc.Admin(2).Decommission(ctx, 4); err != nil || m.State != "decommissioning" {
		t.Fatalf("decommission 4: %+v %v", m, err)
	}
	eventually(t, 3*time.Minute, func() string {
		ci, err := c.clusterInfo(1)
		if err != nil {
			return err.Error()
		}
		for _, s := range ci.Shards {
			if s.HasReplica(4) {
				return fmt.Sprintf("shard %d still has a replica on node 4: %v", s.ID, s.Replicas)
			}
		}
		return ""
	})
	n4.exitsWith(t, "removed from the cluster")
	nodes, err := c.lc.Admin(1).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range nodes.Members {
		if m.ID == 4 && m.State != "removed" {
			t.Fatalf("node 4 is %s after its drain", m.State)
		}
	}
	for _, k := range keys {
		if r := c.do("GET", c.v1URL(3, k, ""), nil); r.code != 200 || r.body != "v-"+k {
			t.Fatalf("GET %s after the drain: %s", k, r)
		}
	}
}
