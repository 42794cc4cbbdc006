package launcher

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// ErrInvalidConfig wraps every error of Config.Validate.
var ErrInvalidConfig = errors.New("launcher: invalid config")

// Config describes a cluster to launch. Zero fields take the defaults
// given (EnsureDefaults); New validates it once and copies it, never
// mutating it afterwards.
type Config struct {
	// Bin is the path of the cairn binary. Required.
	Bin string
	// Nodes is the number of nodes, ids 1..Nodes. Default 3.
	Nodes int
	// Dir holds node i's data dir Dir/node-i and its log Dir/node-i.log.
	// Required.
	Dir string
	// IPs is each node's listen address (len Nodes); default 127.0.0.1 for
	// every node. The chaos lab gives each node its own 127.a.b.n.
	IPs []string
	// HTTPAddrs and PeerAddrs (host:port) fix the nodes' addresses (len
	// Nodes each); default (nil) free ports on IPs, picked at New. Fixed
	// addresses must be free at New (else ErrAddrInUse).
	HTTPAddrs, PeerAddrs []string
	// EtcdAddrs fixes the nodes' etcd API addresses the same way; default
	// (nil) free ports. Unused when the binary has no --etcd-addr flag.
	EtcdAddrs []string
	// Shards at bootstrap, a count; default 0 leaves cairn serve's default
	// (one per node).
	Shards int
	// Replication factor (replicas per shard); default min(3, Nodes).
	Replication int
	// Extra serve flags, appended to every node's command line; default
	// none.
	Extra []string
	// Output, when set, receives node id's stdout and stderr (the demo
	// prefixes and prints them); default (nil): appended to the node's
	// LogPath.
	Output func(id int) io.Writer
	// StopTimeout bounds each node's exit after SIGTERM before SIGKILL.
	// Default 10 s.
	StopTimeout time.Duration
	// OnStart runs right after every start of a node, before it has opened
	// its data (the chaos lab moves it into its cgroups). An error kills
	// the node and fails the start. Default none.
	OnStart func(id, pid int) error
	// OnExit is told when a node exits without the launcher having
	// signalled it (a crash, an OOM kill, kill -9 from outside). Default
	// none.
	OnExit func(id int, err error)
	// SysProcAttr, when set, is given to every node process (tests set
	// Pdeathsig so no node outlives them). Default none.
	SysProcAttr func() *syscall.SysProcAttr
	// TLS, when set, runs every node with HTTPS on its client port and
	// mutual TLS between nodes (tls.go); URL gives https:// then, and the
	// launcher's own requests trust the cluster's CA. Default nil: plain.
	TLS *TLS
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default. It is the one place Config's defaults are filled.
func (c Config) EnsureDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Replication == 0 {
		c.Replication = min(3, c.Nodes)
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.IPs == nil && c.Nodes > 0 {
		c.IPs = make([]string, c.Nodes)
		for i := range c.IPs {
			c.IPs[i] = "127.0.0.1"
		}
	}
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c Config) Validate() error {
	switch {
	case c.Bin == "":
		return fmt.Errorf("%w: Bin is required", ErrInvalidConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	case c.Nodes < 1:
		return fmt.Errorf("%w: Nodes %d: want at least 1", ErrInvalidConfig, c.Nodes)
	case c.Shards < 0:
		return fmt.Errorf("%w: Shards %d: want 0 (one per node) or more", ErrInvalidConfig, c.Shards)
	case c.Replication < 1:
		return fmt.Errorf("%w: Replication %d: want at least 1", ErrInvalidConfig, c.Replication)
	case c.StopTimeout <= 0:
		return fmt.Errorf("%w: StopTimeout %v: want more than 0", ErrInvalidConfig, c.StopTimeout)
	case c.TLS != nil && c.TLS.Dir == "":
		return fmt.Errorf("%w: TLS.Dir is required", ErrInvalidConfig)
	}
	for _, l := range []struct {
		name  string
		addrs []string
	}{{"IPs", c.IPs}, {"HTTPAddrs", c.HTTPAddrs}, {"PeerAddrs", c.PeerAddrs}, {"EtcdAddrs", c.EtcdAddrs}} {
		if l.addrs != nil && len(l.addrs) != c.Nodes {
			return fmt.Errorf("%w: %d %s for %d nodes", ErrInvalidConfig, len(l.addrs), l.name, c.Nodes)
		}
	}
	return nil
}
