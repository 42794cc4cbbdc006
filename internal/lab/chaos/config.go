package chaos

import (
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/launcher"
	"io"
	"log/slog"
	"time"
)

// ErrInvalidConfig wraps every error of the configurations' Validate.
var ErrInvalidConfig = errors.New("chaos: invalid config")

// Config of a chaos run. Run fills its defaults (EnsureDefaults) and
// validates it once.
type Config struct {
	// Scenario names the run in its results and progress; default empty.
	Scenario string
	// Bin is the path of the cairn binary. Required.
	Bin string
	// Dir holds the run's data, logs and results. Required.
	Dir string
	// Nodes is the cluster size, a count. Default 3.
	Nodes int
	// Duration is how long the workload runs (the faults happen inside
	// it). Default 40 s, as cairn chaos --duration.
	Duration time.Duration
	// Workload shapes the recorded client load; zero fields take
	// WorkloadConfig's defaults.
	Workload WorkloadConfig
	// Steps are the scheduled faults; default none (a run without faults).
	Steps []Step
	// Logger receives warnings; default slog.Default().
	Logger *slog.Logger
	// Progress receives one line per event of the run; default (nil):
	// none.
	Progress io.Writer
	// Partitions: see ClusterConfig.Partitions. Default PartitionsAuto.
	Partitions string
	// Preload: records loaded before the workload and mixed into it;
	// zero: none.
	Preload PreloadConfig
	// Secure: see ClusterConfig.Secure. Default false.
	Secure bool
	// TransferLimit, when above 0, is set as the cluster's transfer limit
	// (concurrent replica moves touching one node, 1 to 64) right after
	// the start, through the admin settings call; default 0: the nodes'
	// own default.
	TransferLimit int
	// SnapshotRate, when set, is set as the cluster's snapshot rate
	// (bytes/s each node streams snapshots at; 0 unlimited) right after
	// the start, like TransferLimit; default nil: the nodes' own default.
	SnapshotRate *int64
	// Shards at bootstrap, a count; default 0: one per node.
	Shards int
	// Etcd, when set, makes the workload's register and set clients speak
	// the nodes' etcd API through the clients it dials (etcdload.go);
	// default nil: the HTTP API.
	Etcd EtcdDialer
	// HoldLoad: the load runs until every step has healed, and at least
	// Duration (Scenario.HoldLoad). Default false: Duration exactly.
	HoldLoad bool
	// PortBase: see ClusterConfig.PortBase. Default 0: free ports.
	PortBase int
}

// EnsureDefaults returns a copy of c with every zero field (and every
// zero field of c.Workload) set to its default.
func (c Config) EnsureDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Duration == 0 {
		c.Duration = 40 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Partitions == "" {
		c.Partitions = PartitionsAuto
	}
	c.Workload = c.Workload.EnsureDefaults()
	c.Preload = c.Preload.EnsureDefaults()
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c Config) Validate() error {
	if err := (ClusterConfig{Bin: c.Bin, Nodes: c.Nodes, Dir: c.Dir, Partitions: c.Partitions, PortBase: c.PortBase}).Validate(); err != nil {
		return err
	}
	if c.Shards < 0 {
		return fmt.Errorf("%w: Shards %d: want 0 (one per node) or more", ErrInvalidConfig, c.Shards)
	}
	if c.TransferLimit < 0 || c.TransferLimit > 64 {
		return fmt.Errorf("%w: TransferLimit %d: want 0 (the nodes' default) to 64", ErrInvalidConfig, c.TransferLimit)
	}
	if c.SnapshotRate != nil && *c.SnapshotRate < 0 {
		return fmt.Errorf("%w: SnapshotRate %d: want 0 (unlimited) or more", ErrInvalidConfig, *c.SnapshotRate)
	}
	if c.Duration <= 0 {
		return fmt.Errorf("%w: Duration %v: want more than 0", ErrInvalidConfig, c.Duration)
	}
	for i, s := range c.Steps {
		switch {
		case s.Fault == nil:
			return fmt.Errorf("%w: Steps[%d]: no Fault", ErrInvalidConfig, i)
		case s.At < 0 || s.For < 0:
			return fmt.Errorf("%w: Steps[%d]: At %v, For %v: want 0 or more", ErrInvalidConfig, i, s.At, s.For)
		}
		if err := ValidTarget(s.Target); err != nil {
			return fmt.Errorf("%w: Steps[%d]: %w", ErrInvalidConfig, i, err)
		}
	}
	if err := c.Workload.Validate(); err != nil {
		return fmt.Errorf("%w (in Workload)", err)
	}
	if c.Etcd != nil && c.Workload.IndexKeys > 0 {
		return fmt.Errorf("%w: Workload.IndexKeys with etcd clients: the etcd API has no secondary indexes", ErrInvalidConfig)
	}
	if c.Etcd == nil && c.Workload.Leases > 0 {
		return fmt.Errorf("%w: Workload.Leases needs etcd clients (Etcd): leases are the etcd API's", ErrInvalidConfig)
	}
	if err := c.Preload.Validate(); err != nil {
		return err
	}
	return nil
}

// WorkloadConfig shapes the recorded client load.
type WorkloadConfig struct {
	// Clients is the number of register clients. Default 6.
	Clients int
	// Keys is the number of register keys. Default 8.
	Keys int
	// Timeout bounds one operation, retries included. Default 5 s.
	Timeout time.Duration
	// IndexKeys: this many keys written with secondary-index terms by
	// one more client per node, and checked after healing with index
	// queries (indexed.go). Default 0: none.
	IndexKeys int
	// Leases: this many lease workers besides the other clients, each
	// granting, keeping, revoking and abandoning etcd leases with a key
	// attached, checked after healing (leaseload.go); etcd clients only.
	// Default 0: none.
	Leases int
}

// EnsureDefaults returns a copy of w with every zero field set to its
// default.
func (w WorkloadConfig) EnsureDefaults() WorkloadConfig {
	if w.Clients == 0 {
		w.Clients = 6
	}
	if w.Keys == 0 {
		w.Keys = 8
	}
	if w.Timeout == 0 {
		w.Timeout = 5 * time.Second
	}
	return w
}

// Validate reports the first field of w (filled by EnsureDefaults) that
// is out of range.
func (w WorkloadConfig) Validate() error {
	switch {
	case w.Clients < 1:
		return fmt.Errorf("%w: Clients %d: want at least 1", ErrInvalidConfig, w.Clients)
	case w.Keys < 1:
		return fmt.Errorf("%w: Keys %d: want at least 1", ErrInvalidConfig, w.Keys)
	case w.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v: want more than 0", ErrInvalidConfig, w.Timeout)
	case w.IndexKeys < 0 || w.IndexKeys > 100000:
		return fmt.Errorf("%w: IndexKeys %d: want 0 to 100000", ErrInvalidConfig, w.IndexKeys)
	case w.Leases < 0 || w.Leases > 64:
		return fmt.Errorf("%w: Leases %d: want 0 to 64", ErrInvalidConfig, w.Leases)
	}
	return nil
}

// ClusterConfig describes the cluster to start. StartCluster fills its
// defaults (EnsureDefaults) and validates it once.
type ClusterConfig struct {
	// Bin is the path of the cairn binary. Required.
	Bin string
	// Nodes is the cluster size, a count. Default 3.
	Nodes int
	// Dir holds the nodes' data and logs. Required.
	Dir string
	// Shards at bootstrap, a count; default 0: one per node (cairn serve's
	// default).
	Shards int
	// Extra serve flags, appended to every node's command line; default
	// none.
	Extra []string
	// NoFaultInjection starts the nodes without their fault hook; default
	// false (hook on).
	NoFaultInjection bool
	// Partitions: PartitionsAuto (default), PartitionsIPTables or
	// PartitionsHook.
	Partitions string
	// Secure runs the nodes with TLS on both ports (certificates made
	// under Dir/certs) and the lab's clients over https:// trusting
	// their CA. Default false.
	Secure bool
	// PortBase, when above 0, fixes the nodes' ports: node i (1-based)
	// of n listens for HTTP on PortBase+i-1, for its peers on
	// PortBase+n+i-1 and for the etcd API on PortBase+2n+i-1 (nodes a
	// fault adds pick free ports). Default 0: free ports picked at start.
	PortBase int
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c ClusterConfig) EnsureDefaults() ClusterConfig {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Partitions == "" {
		c.Partitions = PartitionsAuto
	}
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c ClusterConfig) Validate() error {
	if err := c.launcherConfig().EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.PortBase < 0 || c.PortBase > 0 && (c.PortBase < 1024 || c.PortBase+3*c.Nodes > 65536) {
		return fmt.Errorf("%w: PortBase %d: want 0 (free ports) or 1024 to %d", ErrInvalidConfig, c.PortBase, 65536-3*c.Nodes)
	}
	return validPartitions(c.Partitions)
}

// launcherConfig is the part of c the launcher checks and uses.
func (c ClusterConfig) launcherConfig() launcher.Config {
	return launcher.Config{Bin: c.Bin, Nodes: c.Nodes, Dir: c.Dir, Shards: c.Shards}
}

func validPartitions(p string) error {
	switch p {
	case PartitionsAuto, PartitionsIPTables, PartitionsHook:
		return nil
	}
	return fmt.Errorf("%w: Partitions must be %s, %s or %s, not %q", ErrInvalidConfig, PartitionsAuto, PartitionsIPTables, PartitionsHook, p)
}
