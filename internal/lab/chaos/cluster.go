package chaos

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// Bounds of the lab's waits.
const (
	readyTimeout = 30 * time.Second // a started or healed cluster elects every leader
	stopTimeout  = 20 * time.Second // a node exits after SIGTERM, else SIGKILL
)

// Cluster is a set of nodes this process started (launcher.Cluster) with
// what the faults need besides: each node's cgroups and the netfilter
// chain that cuts the network.
type Cluster struct {
	*launcher.Cluster
	hc *http.Client
	// groups[id-1] are node id's own cgroups (nil where the lab cannot
	// make them); every start of the node enters them (launcher OnStart).
	groups []*nodeGroups
	// nf cuts the network between node addresses (PartitionsIPTables).
	nf *netfilter
	// notes are what faults said about their last injection or healing;
	// notesMu also guards mem, backups, extra and corrupt.
	notesMu sync.Mutex
	notes   []string
	// mem holds the figures a memory fault took at healing, by node,
	// until the run takes them (takeMem); under notesMu.
	mem map[int]memFigures
	// backups are the backups backup faults took (under notesMu).
	backups []backupRun
	// extra are the nodes faults started (add-node), under notesMu.
	extra []extraNode
	// corrupt: the shard whose replica a corrupt fault damaged, by node
	// (under notesMu).
	corrupt map[int]corruption
	// newShards are the shards split faults made (under notesMu).
	newShards []uint64
	// retired are the nodes that left the cluster for good (decommissioned
	// or declared dead): the run's final healing does not start them again
	// and the convergence check skips them; under notesMu.
	retired map[int]bool
	// settled is when the work a fault started (a join's rebalance, a
	// drain) was seen done, until runSteps takes it; under notesMu.
	settled time.Time
	// preload is the run's preloaded records and loadEnd when its load
	// stops (zero: when the steps end, Config.HoldLoad), both set by Run
	// before the load starts; elastic is the elastic scenario's check.
	preload PreloadConfig
	loadEnd time.Time
	elastic elasticState
}

func (c *Cluster) putMem(n int, f memFigures) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.mem == nil {
		c.mem = map[int]memFigures{}
	}
	c.mem[n] = f
}

// takeMem returns and forgets node n's last memory figures.
func (c *Cluster) takeMem(n int) (memFigures, bool) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	f, ok := c.mem[n]
	delete(c.mem, n)
	return f, ok
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

// StartCluster starts the nodes and waits until every shard has a leader.
// It fills cfg's defaults and validates it first.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{hc: &http.Client{Timeout: 5 * time.Second}, groups: make([]*nodeGroups, cfg.Nodes)}
	var ips []string // nil: 127.0.0.1 for every node
	switch cfg.Partitions {
	case PartitionsAuto, PartitionsIPTables:
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
	case PartitionsHook: // the nodes' fault hooks cut the network
	}
	if CgroupsSupported() == nil {
		for i := range c.groups {
			g, err := newNodeGroups(i + 1)
			if err != nil {
				c.Close()
				return nil, err
			}
			c.groups[i] = g
		}
	}
	var extra []string
	if !cfg.NoFaultInjection {
		extra = append(extra, "--fault-injection")
	}
	var tlsCfg *launcher.TLS
	if cfg.Secure {
		tlsCfg = &launcher.TLS{Dir: filepath.Join(cfg.Dir, "certs")}
	}
	var httpAddrs, peerAddrs, etcdAddrs []string
	if cfg.PortBase > 0 {
		for i := range cfg.Nodes {
			ip := "127.0.0.1"
			if ips != nil {
				ip = ips[i]
			}
			port := func(k int) string { return net.JoinHostPort(ip, strconv.Itoa(cfg.PortBase+k*cfg.Nodes+i)) }
			httpAddrs, peerAddrs, etcdAddrs = append(httpAddrs, port(0)), append(peerAddrs, port(1)), append(etcdAddrs, port(2))
		}
	}
	lc, err := launcher.Launch(context.Background(), launcher.Config{
		TLS: tlsCfg, Bin: cfg.Bin, Nodes: cfg.Nodes, Dir: cfg.Dir, IPs: ips, Shards: cfg.Shards,
		HTTPAddrs: httpAddrs, PeerAddrs: peerAddrs, EtcdAddrs: etcdAddrs,
		Extra: append(extra, cfg.Extra...), StopTimeout: stopTimeout,
		// Right after the start, before the node has opened its data.
		OnStart: func(id, pid int) error {
			if g := c.groups[id-1]; g != nil {
				return g.enter(pid)
			}
			return nil
		},
	}, readyTimeout)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("chaos: %w", err)
	}
	c.Cluster = lc
	c.hc = lc.HTTPClient()
	return c, nil
}

// clientOptions are the options of the lab's clients of the nodes: with
// TLS they trust the cluster's CA.
func (c *Cluster) clientOptions(timeout time.Duration) client.Options {
	o := client.Options{Timeout: timeout}
	if t := c.TLS(); t != nil {
		o.TLS, _ = t.ClientConfig() // read at launch already
	}
	return o
}

// WaitReady waits until every running node sees a running leader of every
// shard (launcher.Cluster.WaitReady).
func (c *Cluster) WaitReady(timeout time.Duration) error {
	if c.extraCount() == 0 {
		return c.Cluster.WaitReady(context.Background(), timeout)
	}
	// Nodes a fault added (add-node) may lead shards the launcher does
	// not know: every running node must see some leader of every shard.
	deadline := time.Now().Add(timeout)
	for {
		why := c.leaderless()
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: cluster not ready after %v: %s", timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leaderless says which running node sees no leader of some shard ("":
// none).
func (c *Cluster) leaderless() string {
	for i := 1; i <= c.Size(); i++ {
		if !c.Running(i) {
			continue
		}
		ci, err := c.Info(i)
		if err != nil {
			return fmt.Sprintf("node %d: %v", i, err)
		}
		for _, s := range ci.Shards {
			if s.Leader == 0 {
				return fmt.Sprintf("node %d sees no leader of shard %d", i, s.ID)
			}
		}
	}
	return ""
}

// Close kills every node (paused ones too) and removes the lab's cgroups
// and netfilter chain.
func (c *Cluster) Close() {
	c.stopExtra()
	if c.Cluster != nil {
		c.Cluster.Close()
	}
	for _, g := range c.groups {
		if g != nil {
			g.remove()
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

// admin runs f against node i's admin endpoints, bounded by 5 s.
func (c *Cluster) admin(i int, f func(context.Context, *client.Admin) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f(ctx, c.Admin(i)); err != nil {
		return fmt.Errorf("chaos: node %d: %w", i, err)
	}
	return nil
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
		others := make([]uint64, len(side[1]))
		for i, n := range side[1] {
			others[i] = uint64(n)
		}
		for _, node := range side[0] {
			err := c.admin(node, func(ctx context.Context, a *client.Admin) error { return a.Partition(ctx, others...) })
			if err != nil {
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
	for i := 1; i <= c.Size(); i++ {
		err := c.admin(i, func(ctx context.Context, a *client.Admin) error { return a.Partition(ctx) })
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Info returns node i's view of the shards.
func (c *Cluster) Info(i int) (client.ClusterInfo, error) {
	var ci client.ClusterInfo
	err := c.admin(i, func(ctx context.Context, a *client.Admin) (err error) { ci, err = a.Cluster(ctx); return err })
	return ci, err
}

// views returns the view of the shards of every running node but skip.
func (c *Cluster) views(skip int) (map[int]client.ClusterInfo, error) {
	out := map[int]client.ClusterInfo{}
	for i := 1; i <= c.Size(); i++ {
		if i == skip || !c.Running(i) {
			continue
		}
		ci, err := c.Info(i)
		if err != nil {
			return out, err
		}
		out[i] = ci
	}
	return out, nil
}

// Leader returns the leader of shard and one follower, as a running
// replica of the shard sees them.
func (c *Cluster) Leader(shard uint64) (leader, follower int, err error) {
	for i := range c.Size() {
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
func leadsOf(views map[int]client.ClusterInfo, node int) int {
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
	limit, heap, err = goMemory(c.hc, c.URL(i))
	if err != nil {
		return 0, 0, fmt.Errorf("chaos: node %d: %w", i, err)
	}
	return limit, heap, nil
}

// goMemory reads the Go memory limit and heap in use from base's /metrics.
func goMemory(hc *http.Client, base string) (limit, heap int64, err error) {
	resp, err := hc.Get(base + "/metrics")
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
			return 0, 0, fmt.Errorf("%s: %v", name, err)
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
		return 0, 0, fmt.Errorf("no go_gc_gomemlimit_bytes or go_memstats_heap_inuse_bytes in /metrics")
	}
	return limit, heap, nil
}

// hashTimeout bounds one node's answer to a hashes call.
const hashTimeout = 2 * time.Minute

// Hashes returns node i's shard fingerprints.
func (c *Cluster) Hashes(i int) ([]checker.ShardHash, error) {
	var hs []client.ShardHash
	// Hashing reads every replica's data: with preloaded records it takes
	// longer than admin's other calls, and a call given up on leaves the
	// node busy hashing (the next one gets 503 busy until it ends).
	ctx, cancel := context.WithTimeout(context.Background(), hashTimeout)
	defer cancel()
	hc := *c.Cluster.HTTPClient()
	hc.Timeout = hashTimeout
	hs, err := client.NewAdmin(c.URL(i), &hc).Hashes(ctx)
	if err != nil {
		err = fmt.Errorf("chaos: node %d: %w", i, err)
	}
	out := make([]checker.ShardHash, len(hs))
	for j, h := range hs {
		out[j] = checker.ShardHash(h)
	}
	return out, err
}
