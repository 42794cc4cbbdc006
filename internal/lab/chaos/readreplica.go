package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/client"
)

// readReplicaFault starts one more node with --role read-replica that
// joins the running cluster through the target node and leaves it
// running: the balancer gives it a non-voting learner of every shard
// while the workload runs (and the scenario's other steps kill a
// leader). The fault is settled once it holds a learner of every shard.
// Healing checks that it holds a learner of every shard and no voter,
// counts in no quorum (the shards' voters are as many as the replication
// factor), reports its lag, and that writes acknowledged through another
// node are read back from it with serializable reads, which it serves
// from its own learners.
type readReplicaFault struct {
	id    int
	watch *settleWatch
}

func (*readReplicaFault) Kind() string  { return "read-replica" }
func (*readReplicaFault) Param() string { return "" }

func (f *readReplicaFault) Inject(c *Cluster, n int) error {
	id, err := c.joinNode(n, "--role", "read-replica")
	if err != nil {
		return err
	}
	f.id = id
	f.watch = c.watchSettle(func() bool {
		ci, err := c.anyInfo()
		return err == nil && readReplicaProblem(ci, uint64(id)) == ""
	})
	return nil
}

// readReplicaProblem says why node is not a read replica holding a
// learner of every shard and no voter in ci, or "".
func readReplicaProblem(ci client.ClusterInfo, node uint64) string {
	role := ""
	for _, m := range ci.Members {
		if m.NodeID == node {
			role = m.Role
		}
	}
	if role != "read-replica" {
		return fmt.Sprintf("node %d has role %q, not read-replica", node, role)
	}
	for _, s := range ci.Shards {
		if s.HasReplica(node) {
			return fmt.Sprintf("node %d is a voter of shard %d", node, s.ID)
		}
		if !slices.Contains(s.Learners, node) {
			return fmt.Sprintf("node %d has no learner of shard %d", node, s.ID)
		}
		if ci.Replication > 0 && len(s.Replicas) != ci.Replication {
			return fmt.Sprintf("shard %d has %d voters for replication %d", s.ID, len(s.Replicas), ci.Replication)
		}
	}
	return ""
}

// probeKeys: how many writes the heal reads back from the read replica.
const probeKeys = 50

func (f *readReplicaFault) Heal(c *Cluster, n int) error {
	if f.watch != nil {
		f.watch.end()
	}
	if f.id == 0 {
		return errors.New("chaos: no read replica joined")
	}
	x, ok := c.extraNode(f.id)
	if !ok {
		return fmt.Errorf("chaos: node %d is not known", f.id)
	}
	if p := waitFor(60*time.Second, func() string {
		ci, err := c.anyInfo()
		if err != nil {
			return err.Error()
		}
		return readReplicaProblem(ci, uint64(f.id))
	}); p != "" {
		return fmt.Errorf("chaos: %s after 60 s", p)
	}
	// Writes acknowledged through a voter node, then read from the read
	// replica alone: each must show there within 30 s (its lag).
	via := other(c, 0)
	opts := client.Options{Timeout: 10 * time.Second}
	voters, err := client.New([]string{c.URL(via)}, opts)
	if err != nil {
		return err
	}
	reader, err := client.New([]string{x.url}, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	var slowest time.Duration
	for i := range probeKeys {
		key := []byte(fmt.Sprintf("read-replica-probe/%d", i))
		val := []byte(fmt.Sprintf("%d@%d", i, start.UnixNano()))
		if _, err := voters.Put(ctx, key, val, client.PutOptions{}); err != nil {
			return fmt.Errorf("chaos: probe write %s: %w", key, err)
		}
		acked := time.Now()
		for {
			got, err := reader.Get(ctx, key, true)
			if err == nil && bytes.Equal(got.Value, val) {
				slowest = max(slowest, time.Since(acked))
				break
			}
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				return fmt.Errorf("chaos: serializable read of %s from read replica %d: %w", key, f.id, err)
			}
			if time.Since(acked) > 30*time.Second {
				return fmt.Errorf("chaos: read replica %d did not show %s within 30 s of its acknowledgement", f.id, key)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	lag := "unknown"
	if ci, err := c.infoOf(f.id); err == nil {
		for _, m := range ci.Members {
			if m.NodeID == uint64(f.id) && m.MaxLag != nil {
				lag = fmt.Sprint(*m.MaxLag)
			}
		}
	}
	c.Notef("read replica %d: a learner of every shard, no voter; %d writes through node %d read back from it (serializable) at most %d ms after their acknowledgement; max lag %s entries",
		f.id, probeKeys, via, slowest.Milliseconds(), lag)
	return nil
}
