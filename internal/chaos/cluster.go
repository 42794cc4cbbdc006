package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/checker"
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
}

// Cluster is a set of nodes this process started.
type Cluster struct {
	Bin   string
	Nodes []*Node
	args  []string
	hc    *http.Client
}

// ClusterConfig describes the cluster to start.
type ClusterConfig struct {
	Bin    string   // the cairn binary
	Nodes  int      // default 3
	Dir    string   // data and logs
	Shards int      // default 16
	Extra  []string // extra serve flags
	// NoFaultInjection starts the nodes without their fault hook.
	NoFaultInjection bool
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
	if cfg.Shards == 0 {
		cfg.Shards = 16
	}
	c := &Cluster{Bin: cfg.Bin, hc: &http.Client{Timeout: 5 * time.Second}}
	var peers []string
	for i := 1; i <= cfg.Nodes; i++ {
		h, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p, err := freeAddr()
		if err != nil {
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

// WaitReady polls until every running node answers and sees a live leader
// for every shard.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	why := "not checked"
	for time.Now().Before(deadline) {
		why = ""
		for i := range c.Nodes {
			if !c.Running(i + 1) {
				continue
			}
			ci, err := c.Info(i + 1)
			if err != nil {
				why = fmt.Sprintf("node %d: %v", i+1, err)
				break
			}
			for _, s := range ci.Shards {
				if s.Leader == 0 || int(s.Leader) > len(c.Nodes) || !c.Running(int(s.Leader)) {
					why = fmt.Sprintf("node %d sees no live leader of shard %d", i+1, s.ID)
					break
				}
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: cluster not ready after %v: %s", timeout, why)
}

// Leader returns the leader of shard and one follower, as a running node
// sees them.
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
			if s.ID != shard || s.Leader == 0 {
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
