package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A node killed while it held a replica of every shard, declared dead
// while down, its replicas rebuilt on a new node, and started again on
// its data dir learns it was removed (reading the record through another
// member, whose address it persisted: its own replicas know no leader
// any more) and exits at once, rather than only once its orphaned
// replicas are collected.
func TestDeadNodeStartedAgainExits(t *testing.T) {
	c := newCluster(t, 3)
	n4 := newExtraNode(t, 4)
	n4.start(t, "--join", c.url(1))
	n4.waitUp(t)
	time.Sleep(2 * time.Second) // node 2 reads the record with node 4 in it (about once a second)
	c.lc.Kill(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m, err := c.lc.Admin(1).RemoveDead(ctx, 2); err != nil || m.State != "dead" {
		t.Fatalf("remove 2 --dead: %+v %v", m, err)
	}
	eventually(t, 2*time.Minute, func() string {
		ci, err := c.clusterInfo(1)
		if err != nil {
			return err.Error()
		}
		for _, s := range ci.Shards {
			if s.HasReplica(2) || len(s.Replicas) != 3 || len(s.Learners) > 0 {
				return fmt.Sprintf("shard %d: voters %v, learners %v", s.ID, s.Replicas, s.Learners)
			}
		}
		return ""
	})
	t0 := time.Now()
	if err := c.lc.Start(2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.lc.Exited(2):
		t.Logf("node 2 started again exited after %v", time.Since(t0).Round(100*time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Fatalf("node 2, declared dead, started again and still runs 60 s later:\n%s", tail(c.lc.Log(2), 20))
	}
	c.exitedAsExpected(2)
	log := c.lc.Log(2)
	log = log[strings.LastIndex(log, "starting node 2"):]
	learned := strings.Index(log, "this node was removed from the cluster")
	if learned < 0 {
		t.Fatalf("node 2 exited without saying it was removed:\n%s", tail(log, 20))
	}
	// It learned from the record, not by waiting for its orphaned
	// replicas to be collected (two orphan checks, 20 s) first.
	if orphan := strings.Index(log, "while away"); orphan >= 0 && orphan < learned {
		t.Fatalf("node 2 learned it was removed only after collecting its orphaned replicas:\n%s", tail(log, 20))
	}
}

// exitedAsExpected forgets that node i exited on its own (the test wanted
// it to), once the launcher has reported it.
func (c *cluster) exitedAsExpected(i int) {
	eventually(c.t, 10*time.Second, func() string {
		c.mu.Lock()
		defer c.mu.Unlock()
		var keep []string
		for _, u := range c.unexpect {
			if !strings.HasPrefix(u, fmt.Sprintf("node %d exited on its own", i)) {
				keep = append(keep, u)
			}
		}
		if len(keep) == len(c.unexpect) {
			return "not reported yet"
		}
		c.unexpect = keep
		return ""
	})
}
