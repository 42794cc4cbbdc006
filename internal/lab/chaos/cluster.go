package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/lab/checker"
)

// Node is one `cairn serve` process.
type Node struct {
	ID       int
	HTTPAddr string
	PeerAddr string
	Dir      string
	LogPath  string
	cmd      *exec.Cmd
	exited   chan struct{}
	// groups: the node's own cgroups (nil where the lab cannot make them);
	// every start of the node enters them.
	groups *nodeGroups
}

// Cluster is a set of nodes this process started.
type Cluster struct {
	Bin   string
	Nodes []*Node
	args  []string
	hc    *http.Client
	// nf cuts the network between node addresses (PartitionsIPTables).
	nf *netfilter
	// notes are what faults said about their last injection or healing.
	notesMu sync.Mutex
	notes   []string
}

// Notef records a note about the fault being injected or healed; the run
// prints it and keeps it in the fault's result.
func (c *Cluster) Notef(format string, args ...any) {
	c.notesMu.Lock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
	c.notesMu.Unlock()
}

// takeNotes returns the notes recorded since the last call.
func (c *Cluster) takeNotes() []string {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	out := c.notes
	c.notes = nil
	return out
}

// ClusterConfig describes the cluster to start.
type ClusterConfig struct {
	Bin    string   // the cairn binary
	Nodes  int      // default 3
	Dir    string   // data and logs
	Shards int      // default 0: one per node (cairn serve's default)
	Extra  []string // extra serve flags
	// NoFaultInjection starts the nodes without their fault hook.
	NoFaultInjection bool
	// Partitions: PartitionsAuto (default), PartitionsIPTables or
	// PartitionsHook.
	Partitions string
}

func freeAddr(ip string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartCluster starts the nodes and waits until every shard has a leader.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	c := &Cluster{Bin: cfg.Bin, hc: &http.Client{Timeout: 5 * time.Second}}
	ips := make([]string, cfg.Nodes)
	for i := range ips {
		ips[i] = "127.0.0.1"
	}
	switch cfg.Partitions {
	case "", PartitionsAuto, PartitionsIPTables:
		nf, err := newNetfilter()
		if err != nil {
			if cfg.Partitions == PartitionsIPTables {
				return nil, err
			}
			break
		}
		if ips, err = nodeIPs(cfg.Nodes); err != nil {
			nf.close()
			return nil, err
		}
		c.nf = nf
	case PartitionsHook:
	default:
		return nil, fmt.Errorf("chaos: partitions must be %s, %s or %s, not %q", PartitionsAuto, PartitionsIPTables, PartitionsHook, cfg.Partitions)
	}
	var peers []string
	for i := 1; i <= cfg.Nodes; i++ {
		h, err := freeAddr(ips[i-1])
		if err != nil {
			c.Close()
			return nil, err
		}
		p, err := freeAddr(ips[i-1])
		if err != nil {
			c.Close()
			return nil, err
		}
		n := &Node{ID: i, HTTPAddr: h, PeerAddr: p, Dir: filepath.Join(cfg.Dir, fmt.Sprint("node-", i)),
			LogPath: filepath.Join(cfg.Dir, fmt.Sprintf("node-%d.log", i))}
		c.Nodes = append(c.Nodes, n)
		peers = append(peers, fmt.Sprintf("%d=%s", i, p))
	}
	c.args = []string{"--initial-cluster", strings.Join(peers, ","), "--shards", fmt.Sprint(cfg.Shards),
		"--replication", fmt.Sprint(min(3, cfg.Nodes))}
	if !cfg.NoFaultInjection {
		c.args = append(c.args, "--fault-injection")
	}
	c.args = append(c.args, cfg.Extra...)
	if CgroupsSupported() == nil {
		for _, n := range c.Nodes {
			g, err := newNodeGroups(n.ID)
			if err != nil {
				c.Close()
				return nil, err
			}
			n.groups = g
		}
	}
	for i := range c.Nodes {
		if err := c.Start(i + 1); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Node returns node i (1-based).
func (c *Cluster) Node(i int) *Node { return c.Nodes[i-1] }

// URL of node i.
func (c *Cluster) URL(i int) string { return "http://" + c.Node(i).HTTPAddr }

// Endpoints of every node.
func (c *Cluster) Endpoints() []string {
	var out []string
	for i := range c.Nodes {
		out = append(out, c.URL(i+1))
	}
	return out
}

// Running reports whether node i's process is alive.
func (c *Cluster) Running(i int) bool {
	n := c.Node(i)
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid of node i.
func (c *Cluster) Pid(i int) int { return c.Node(i).cmd.Process.Pid }

// Start (or restart) node i on its data dir.
func (c *Cluster) Start(i int) error {
	n := c.Node(i)
	if c.Running(i) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(n.LogPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"serve", "--node-id", fmt.Sprint(n.ID), "--http-addr", n.HTTPAddr,
		"--peer-addr", n.PeerAddr, "--data-dir", n.Dir}, c.args...)
	n.cmd = exec.Command(c.Bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	if n.groups != nil {
		// Right after the start, before the node has opened its data.
		if err := n.groups.enter(n.cmd.Process.Pid); err != nil {
			_ = n.cmd.Process.Kill()
			_ = n.cmd.Wait()
			logf.Close()
			return fmt.Errorf("chaos: node %d into its cgroups: %w", n.ID, err)
		}
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); logf.Close(); close(done) }(n.cmd, n.exited)
	return nil
}

func (c *Cluster) signal(i int, s syscall.Signal, wait bool) {
	if !c.Running(i) {
		return
	}
	n := c.Node(i)
	_ = n.cmd.Process.Signal(s)
	if !wait {
		return
	}
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// Kill sends SIGKILL to node i and waits for it to exit.
func (c *Cluster) Kill(i int) { c.signal(i, syscall.SIGKILL, true) }

// Stop sends SIGTERM to node i and waits for it to exit.
func (c *Cluster) Stop(i int) { c.signal(i, syscall.SIGTERM, true) }

// Pause stops node i with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(i int)  { c.signal(i, syscall.SIGSTOP, false) }
func (c *Cluster) Resume(i int) { c.signal(i, syscall.SIGCONT, false) }

// Close kills every node (resuming paused ones first).
func (c *Cluster) Close() {
	for i := range c.Nodes {
		c.Resume(i + 1)
		c.Kill(i + 1)
	}
	for _, n := range c.Nodes {
		if n.groups != nil {
			n.groups.remove()
		}
	}
	if c.nf != nil {
		c.nf.close()
	}
}

// PartitionMechanism says how partition faults cut the network.
func (c *Cluster) PartitionMechanism() string {
	if c.nf != nil {
		return PartitionsIPTables
	}
	return PartitionsHook
}

// cut isolates the nodes of side a from those of side b, both ways.
func (c *Cluster) cut(a, b []int) error {
	if c.nf != nil {
		var pairs [][2]string
		for _, x := range a {
			for _, y := range b {
				pairs = append(pairs, [2]string{c.Node(x).PeerAddr, c.Node(y).PeerAddr})
			}
		}
		return c.nf.cut(pairs)
	}
	for _, side := range [][2][]int{{a, b}, {b, a}} {
		for _, node := range side[0] {
			if err := c.Admin(node, "partition="+joinInts(side[1])); err != nil {
				return err
			}
		}
	}
	return nil
}

// healCuts restores every connection cut.
func (c *Cluster) healCuts() error {
	if c.nf != nil {
		return c.nf.heal()
	}
	var first error
	for i := range c.Nodes {
		if err := c.Admin(i+1, "partition="); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ClusterInfo is the part of GET /v1/cluster the lab reads.
type ClusterInfo struct {
	Shards []struct {
		ID       uint64   `json:"id"`
		Leader   uint64   `json:"leader"`
		Replicas []uint64 `json:"replicas"`
	} `json:"shards"`
}

// Info returns node i's view of the shards.
func (c *Cluster) Info(i int) (ClusterInfo, error) {
	var ci ClusterInfo
	resp, err := c.hc.Get(c.URL(i) + "/v1/cluster")
	if err != nil {
		return ci, err
	}
	defer resp.Body.Close()
	return ci, json.NewDecoder(resp.Body).Decode(&ci)
}

// WaitReady polls until every running node answers and every running
// replica of every shard sees a live leader. A node that holds no replica of
// a shard (more nodes than the replication factor) only learns its leader
// when it routes a request there, so its view of that shard does not count.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	why := "not checked"
	for time.Now().Before(deadline) {
		views, err := c.views(0)
		if err != nil {
			why = err.Error()
		} else {
			why = notReady(views, c.Running, len(c.Nodes))
		}
		if why == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: cluster not ready after %v: %s", timeout, why)
}

// views returns the view of the shards of every running node but skip.
func (c *Cluster) views(skip int) (map[int]ClusterInfo, error) {
	out := map[int]ClusterInfo{}
	for i := range c.Nodes {
		if i+1 == skip || !c.Running(i+1) {
			continue
		}
		ci, err := c.Info(i + 1)
		if err != nil {
			return out, fmt.Errorf("node %d: %v", i+1, err)
		}
		out[i+1] = ci
	}
	return out, nil
}

// notReady explains why the nodes' views (by node) do not show a live
// leader, known to every replica, of every shard; "" when they do.
func notReady(views map[int]ClusterInfo, running func(int) bool, nodes int) string {
	ids := make([]int, 0, len(views))
	for id := range views {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		for _, s := range views[id].Shards {
			if !slices.Contains(s.Replicas, uint64(id)) {
				continue
			}
			if s.Leader == 0 || int(s.Leader) > nodes || !running(int(s.Leader)) {
				return fmt.Sprintf("node %d sees no live leader of shard %d", id, s.ID)
			}
		}
	}
	return ""
}

// Leader returns the leader of shard and one follower, as a running
// replica of the shard sees them.
func (c *Cluster) Leader(shard uint64) (leader, follower int, err error) {
	for i := range c.Nodes {
		if !c.Running(i + 1) {
			continue
		}
		ci, err := c.Info(i + 1)
		if err != nil {
			continue
		}
		for _, s := range ci.Shards {
			if s.ID != shard || s.Leader == 0 || !slices.Contains(s.Replicas, uint64(i+1)) {
				continue
			}
			for _, r := range s.Replicas {
				if r != s.Leader {
					return int(s.Leader), int(r), nil
				}
			}
			return int(s.Leader), 0, nil
		}
	}
	return 0, 0, fmt.Errorf("chaos: no leader known for shard %d", shard)
}

// LeaderCount returns how many shards node i leads as the other running
// nodes see it, or -1 when none of them answers.
func (c *Cluster) LeaderCount(i int) int {
	views, _ := c.views(i)
	if len(views) == 0 {
		return -1
	}
	return leadsOf(views, i)
}

// leadsOf counts the shards that every replica of the shard in views (the
// shards as other nodes see them) says node leads: a replica cut off from
// the rest may not have heard of a new leader, and a node that holds no
// replica of a shard only knows the leader it last routed to.
func leadsOf(views map[int]ClusterInfo, node int) int {
	seen := map[uint64]int{} // shard -> 1: every replica so far says node, -1: one does not
	for id, ci := range views {
		for _, s := range ci.Shards {
			if !slices.Contains(s.Replicas, uint64(id)) {
				continue
			}
			if int(s.Leader) != node {
				seen[s.ID] = -1
			} else if seen[s.ID] == 0 {
				seen[s.ID] = 1
			}
		}
	}
	n := 0
	for _, v := range seen {
		if v == 1 {
			n++
		}
	}
	return n
}

// GoMemory returns node i's Go soft memory limit (go_gc_gomemlimit_bytes
// of its /metrics; math.MaxInt64 is none) and its Go heap in use
// (go_memstats_heap_inuse_bytes).
func (c *Cluster) GoMemory(i int) (limit, heap int64, err error) {
	resp, err := c.hc.Get(c.URL(i) + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || name != "go_gc_gomemlimit_bytes" && name != "go_memstats_heap_inuse_bytes" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("chaos: node %d: %s: %v", i, name, err)
		}
		n := int64(math.MaxInt64)
		if f < math.MaxInt64 {
			n = int64(f)
		}
		if name == "go_gc_gomemlimit_bytes" {
			limit = n
		} else {
			heap = n
		}
		found++
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("chaos: node %d reports no go_gc_gomemlimit_bytes or go_memstats_heap_inuse_bytes", i)
	}
	return limit, heap, nil
}

// Admin posts to node i's fault hook.
func (c *Cluster) Admin(i int, query string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(i)+"/v1/admin/fault?"+query, nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chaos: admin %s on node %d: %s", query, i, resp.Status)
	}
	return nil
}

// Hashes returns node i's shard fingerprints.
func (c *Cluster) Hashes(i int) ([]checker.ShardHash, error) {
	resp, err := c.hc.Get(c.URL(i) + "/v1/admin/hashes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var hs []checker.ShardHash
	return hs, json.NewDecoder(resp.Body).Decode(&hs)
}
