package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
)

// readReplicaFault starts one more node with --role read-replica that
// joins the running cluster through the target node and leaves it
// running: the balancer gives it a non-voting learner of every shard
// while the workload runs (and the scenario's other steps kill a
// leader). The fault is settled once it holds a learner of every shard.
// Healing checks that it holds a learner of every shard and no voter,
// counting in no quorum (the shards' voters are as many as the
// replication factor).
type readReplicaFault struct {
	id    int
	watch *settleWatch
}

// readReplicaReads checks the read replica a readReplicaFault started,
// later in the run (after the scenario's leader kill): it still holds a
// learner of every shard and no voter, and writes acknowledged through a
// voter node are read back from it with serializable reads, which it
// serves from its own learners.
type readReplicaReads struct{}

func (readReplicaReads) Kind() string               { return "read-replica-reads" }
func (readReplicaReads) Param() string              { return "" }
func (readReplicaReads) Inject(*Cluster, int) error { return nil }

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
	return c.checkReadReplica(f.id)
}

// checkReadReplica waits up to 60 s for node id to hold a learner of
// every shard and no voter.
func (c *Cluster) checkReadReplica(id int) error {
	if p := waitFor(60*time.Second, func() string {
		ci, err := c.anyInfo()
		if err != nil {
			return err.Error()
		}
		return readReplicaProblem(ci, uint64(id))
	}); p != "" {
		return fmt.Errorf("chaos: %s after 60 s", p)
	}
	c.Notef("node %d: a learner of every shard, no voter", id)
	return nil
}

// Heal finds the read replica, checks it as readReplicaFault does, and
// reads back from it writes acknowledged through a voter node.
func (readReplicaReads) Heal(c *Cluster, n int) error {
	var x extraNode
	for _, e := range c.extraNodes() {
		if slices.Contains(e.args, "read-replica") {
			x = e
		}
	}
	if x.id == 0 {
		return errors.New("chaos: no read replica to read from")
	}
	if err := c.checkReadReplica(x.id); err != nil {
		return err
	}
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
	served0, err := readReplicaReadsServed(ctx, x.url)
	if err != nil {
		return err
	}
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
				return fmt.Errorf("chaos: serializable read of %s from read replica %d: %w", key, x.id, err)
			}
			if time.Since(acked) > 30*time.Second {
				return fmt.Errorf("chaos: read replica %d did not show %s within 30 s of its acknowledgement", x.id, key)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Each read that found its value was served by the read replica's own
	// learner, not forwarded to a voter: its counter says so.
	served, err := readReplicaReadsServed(ctx, x.url)
	if err != nil {
		return err
	}
	if served-served0 < probeKeys {
		return fmt.Errorf("chaos: read replica %d served %.0f reads itself, want at least %d", x.id, served-served0, probeKeys)
	}
	lag := "unknown"
	if ci, err := c.infoOf(x.id); err == nil {
		for _, m := range ci.Members {
			if m.NodeID == uint64(x.id) && m.MaxLag != nil {
				lag = fmt.Sprint(*m.MaxLag)
			}
		}
	}
	c.Notef("read replica %d: a learner of every shard, no voter; %d writes through node %d read back from it (serializable) at most %d ms after their acknowledgement; max lag %s entries",
		x.id, probeKeys, via, slowest.Milliseconds(), lag)
	return nil
}

// readReplicaReadsServed reads cairn_read_replica_reads_total, the reads
// a node served from its own learners, from its /metrics.
func readReplicaReadsServed(ctx context.Context, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("chaos: metrics of %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "cairn_read_replica_reads_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("chaos: %s/metrics has no cairn_read_replica_reads_total", url)
}
