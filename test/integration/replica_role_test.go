package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// roleCounts is node id's voters and learners, and the shards without
// three voters, as node base sees the shards.
func roleCounts(base string, id uint64) (voters, learners, short int, err error) {
	ci, err := client.NewAdmin(base, nil).Cluster(context.Background())
	if err != nil {
		return 0, 0, 0, err
	}
	for _, s := range ci.Shards {
		for _, n := range s.Replicas {
			if n == id {
				voters++
			}
		}
		for _, n := range s.Learners {
			if n == id {
				learners++
			}
		}
		if len(s.Replicas) != 3 {
			short++
		}
	}
	return voters, learners, short, nil
}

// A read replica's role changes at run time: a voter move to it is
// refused, set-role voter removes its learners and the balancer gives it
// its share of voters, set-role read-replica moves its voters away (the
// replication factor kept) and gives it learners again, and a
// decommission removes its learners and then the node. Turning one of
// three voters into a read replica at replication 3 is refused.
func TestReadReplicaRoleChanges(t *testing.T) {
	c := newCluster(t, 3)
	keys := c.keysPerShard("role", 2)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(1, k, ""), []byte("v-"+k)); r.code != 201 && r.code != 200 {
			t.Fatalf("PUT %s: %s", k, r)
		}
	}
	n4 := newExtraNode(t, 4)
	n4.start(t, "--join", c.url(1), "--role", "read-replica")
	t.Cleanup(func() { // the membership changes, for a failure's reader
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(n4.logPath)
		for i, log := range []string{c.lc.Log(1), c.lc.Log(2), c.lc.Log(3), string(b)} {
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "membership change") || strings.Contains(line, "balancer") || strings.Contains(line, "set-role") ||
					strings.Contains(line, "learner replica") || strings.Contains(line, "replica removed") || strings.Contains(line, "orphan") {
					t.Logf("node %d: %s", i+1, line)
				}
			}
		}
	})
	n4.waitUp(t)
	waitLearners(t, n4.url(), 4, 3*time.Minute)
	a := client.NewAdmin(c.url(2), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ae *client.Error
	if err := a.MoveShard(ctx, 1, 1, 4); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Fatalf("a voter moved by hand to the read replica: %v, want 400", err)
	}
	if nodes, err := a.Nodes(ctx); err != nil || nodes.PausedUntil != 0 {
		t.Fatalf("the refused move paused rebalancing: %+v %v", nodes, err)
	}
	if _, err := a.SetRole(ctx, 1, "read-replica"); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "too_few_nodes" {
		t.Fatalf("set-role 1 read-replica with 3 voters at replication 3: %v, want 409 too_few_nodes", err)
	}
	if _, err := a.SetRole(ctx, 4, "reader"); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Fatalf("set-role 4 reader: %v, want 400", err)
	}
	wait := func(what string, ok func(v, l, short int) bool) time.Duration {
		t.Helper()
		start := time.Now()
		eventually(t, 3*time.Minute, func() string {
			v, l, short, err := roleCounts(c.url(1), 4)
			if err != nil {
				return err.Error()
			}
			if !ok(v, l, short) {
				return fmt.Sprintf("%s: node 4 holds %d voters, %d learners; %d shards without 3 voters", what, v, l, short)
			}
			return ""
		})
		return time.Since(start)
	}
	// set-role voter right after the learners filled: the last learner
	// adds may still run (they return once caught up) and land after the
	// role changed; the balancer removes every learner of the node before
	// it places voters there, so none stays next to its voters.
	if m, err := a.SetRole(ctx, 4, "voter"); err != nil || m.Role != "" {
		t.Fatalf("set-role 4 voter: %+v %v", m, err)
	}
	took := wait("voter", func(v, l, short int) bool { return l == 0 && v >= 11 && short == 0 })
	t.Logf("set-role voter: node 4 holds its share of voters and no learner after %v", took.Round(time.Second))
	if nodes, err := a.Nodes(ctx); err != nil {
		t.Fatal(err)
	} else {
		for _, m := range nodes.Members {
			if m.ID == 4 && m.DropLearners {
				t.Fatalf("node 4 holds voters and is still marked to drop its learners: %+v", m)
			}
		}
	}
	if m, err := a.SetRole(ctx, 4, "read-replica"); err != nil || m.Role != "read-replica" {
		t.Fatalf("set-role 4 read-replica: %+v %v", m, err)
	}
	took = wait("read replica", func(v, l, short int) bool { return v == 0 && l == 16 && short == 0 })
	t.Logf("set-role read-replica: node 4 holds 16 learners and no voter after %v", took.Round(time.Second))
	for _, k := range keys {
		if r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k)+"?consistency=serializable", nil); r.code != 200 || r.body != "v-"+k {
			t.Fatalf("serializable GET %s through node 4: %s", k, r)
		}
	}
	if _, err := a.Decommission(ctx, 4); err != nil {
		t.Fatalf("decommission 4: %v", err)
	}
	took = wait("decommissioned", func(v, l, short int) bool { return v == 0 && l == 0 && short == 0 })
	select {
	case <-n4.proc.Done():
	case <-time.After(time.Minute):
		t.Fatal("node 4 did not exit once drained")
	}
	nodes, err := a.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range nodes.Members {
		if m.ID == 4 && m.State != "removed" {
			t.Fatalf("node 4 is %s after its drain", m.State)
		}
	}
	t.Logf("decommission: node 4's learners removed after %v, then the node", took.Round(time.Second))
}
