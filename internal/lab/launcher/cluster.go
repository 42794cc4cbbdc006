package launcher

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/client"
)

// Node is one `cairn serve` process, possibly started many times on the
// same data dir and addresses.
type Node struct {
	ID       int
	HTTPAddr string
	PeerAddr string
	// EtcdAddr is where the node serves the etcd v3 API; "" when the
	// binary has no --etcd-addr flag (an older Cairn).
	EtcdAddr string
	Dir      string // data dir, kept across restarts
	LogPath  string // stdout and stderr of every run, appended (without Config.Output)

	mu       sync.Mutex
	proc     *Process
	expected bool // the launcher signalled the current run
	// logged is closed once the last run's exit is in its log (nil
	// before the first run): the next run's lines come after it.
	logged chan struct{}
}

// Cluster is a set of nodes this process launched. Its methods take node
// ids (1-based) and are safe for concurrent use.
type Cluster struct {
	cfg   Config
	nodes []*Node
	args  []string // flags common to every node
	hc    *http.Client
}

// New prepares a cluster (addresses, directories) without starting it;
// it fills cfg's defaults and validates it first.
func New(cfg Config) (*Cluster, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Every node gets an etcd API address of its own: the default (HTTP
	// port + 100) could be another node's port.
	httpAddrs, peerAddrs, etcdAddrs, err := pickAddrs(cfg, hasFlag(cfg.Bin, "--etcd-addr"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	var peers []string
	for i := 1; i <= cfg.Nodes; i++ {
		c.nodes = append(c.nodes, &Node{ID: i, HTTPAddr: httpAddrs[i-1], PeerAddr: peerAddrs[i-1],
			Dir: filepath.Join(cfg.Dir, fmt.Sprint("node-", i)), LogPath: filepath.Join(cfg.Dir, fmt.Sprintf("node-%d.log", i))})
		if etcdAddrs != nil {
			c.nodes[i-1].EtcdAddr = etcdAddrs[i-1]
		}
		peers = append(peers, fmt.Sprintf("%d=%s", i, peerAddrs[i-1]))
	}
	c.args = append([]string{"--initial-cluster", strings.Join(peers, ","), "--shards", fmt.Sprint(cfg.Shards),
		"--replication", fmt.Sprint(cfg.Replication)}, cfg.Extra...)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		if err := cfg.TLS.makeCerts(c.nodes); err != nil {
			return nil, err
		}
	}
	if c.hc, err = httpClient(cfg.TLS); err != nil {
		return nil, err
	}
	return c, nil
}

// pickAddrs returns the nodes' HTTP, peer and (withEtcd) etcd API
// addresses: those cfg fixes, checked free, and for the others free ones,
// all picked in one FreeAddrs call — picked one kind at a time, a port
// released after one kind could be handed out again for the next on the
// same IP.
func pickAddrs(cfg Config, withEtcd bool) (httpAddrs, peerAddrs, etcdAddrs []string, err error) {
	fixed := [][]string{cfg.HTTPAddrs, cfg.PeerAddrs, cfg.EtcdAddrs}
	if !withEtcd {
		fixed = fixed[:2]
	}
	var ips []string
	for _, f := range fixed {
		if f == nil {
			ips = append(ips, cfg.IPs...)
		}
	}
	free, err := FreeAddrs(ips)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([][]string, 3)
	for k, f := range fixed {
		if f == nil {
			out[k], free = free[:len(cfg.IPs)], free[len(cfg.IPs):]
			continue
		}
		for _, a := range f {
			l, err := net.Listen("tcp", a)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%w: %s is not free: %v", ErrAddrInUse, a, err)
			}
			l.Close()
		}
		out[k] = f
	}
	return out[0], out[1], out[2], nil
}

// FreeAddrs returns one address per ip (host:port) that was free a moment
// ago: all are held open together so none repeats, then released.
func FreeAddrs(ips []string) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, len(ips))
	for i, ip := range ips {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out[i] = l.Addr().String()
	}
	return out, nil
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node returns node id.
func (c *Cluster) Node(id int) *Node { return c.nodes[id-1] }

// Replication is the cluster's replication factor.
func (c *Cluster) Replication() int { return c.cfg.Replication }

// URL is node id's HTTP base URL.
func (c *Cluster) URL(id int) string {
	if c.cfg.TLS != nil {
		return "https://" + c.Node(id).HTTPAddr
	}
	return "http://" + c.Node(id).HTTPAddr
}

// TLS is the cluster's TLS setting (nil: plain).
func (c *Cluster) TLS() *TLS { return c.cfg.TLS }

// HTTPClient is the launcher's client of the nodes (it trusts the
// cluster's CA under TLS).
func (c *Cluster) HTTPClient() *http.Client { return c.hc }

// Bin is the cairn binary the nodes run.
func (c *Cluster) Bin() string { return c.cfg.Bin }

// Dir holds the nodes' data dirs and logs.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Endpoints are every node's URL, in id order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.nodes))
	for i := range c.nodes {
		out[i] = c.URL(i + 1)
	}
	return out
}

// Admin is a client of node id's status, cluster and admin endpoints.
func (c *Cluster) Admin(id int) *client.Admin { return client.NewAdmin(c.URL(id), c.hc) }

func (c *Cluster) proc(id int) *Process {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Running reports whether node id's process is alive.
func (c *Cluster) Running(id int) bool {
	p := c.proc(id)
	return p != nil && p.Running()
}

// Pid of node id's current (or last) process; 0 if never started.
func (c *Cluster) Pid(id int) int {
	if p := c.proc(id); p != nil {
		return p.Pid()
	}
	return 0
}

// Exited is closed when node id's current process exits (nil if the node
// was never started).
func (c *Cluster) Exited(id int) <-chan struct{} {
	if p := c.proc(id); p != nil {
		return p.Done()
	}
	return nil
}

// Log returns what node id wrote to its log file so far.
func (c *Cluster) Log(id int) string {
	b, _ := os.ReadFile(c.Node(id).LogPath)
	return string(b)
}

// hasFlag reports whether `bin serve` knows flag (binaries of earlier
// Cairn versions, run by A/B comparisons, may not). The probe is bounded:
// a stand-in binary that does not answer --help counts as not knowing it.
func hasFlag(bin, flag string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), flagProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--help")
	cmd.WaitDelay = time.Second
	out, _ := cmd.CombinedOutput()
	return strings.Contains(string(out), flag+" ")
}

// flagProbeTimeout bounds hasFlag (cairn answers --help in milliseconds).
const flagProbeTimeout = 2 * time.Second
