package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Fault is one kind of failure, injected into and healed from a node.
type Fault interface {
	Kind() string
	// Param describes the fault's setting (quota, limit, …), or "".
	Param() string
	Inject(c *Cluster, node int) error
	Heal(c *Cluster, node int) error
}

// ErrUnsupported is returned when the machine cannot inject a fault (no
// writable cgroup hierarchy, for example).
var ErrUnsupported = errors.New("chaos: fault not supported on this machine")

type killFault struct{}

func (killFault) Kind() string                   { return "kill" }
func (killFault) Param() string                  { return "" }
func (killFault) Inject(c *Cluster, n int) error { c.Kill(n); return nil }
func (killFault) Heal(c *Cluster, n int) error   { return c.Start(n) }

type pauseFault struct{}

func (pauseFault) Kind() string                   { return "pause" }
func (pauseFault) Param() string                  { return "" }
func (pauseFault) Inject(c *Cluster, n int) error { c.Pause(n); return nil }
func (pauseFault) Heal(c *Cluster, n int) error   { c.Resume(n); return nil }

// restartFault stops a node cleanly (SIGTERM) and starts it again.
type restartFault struct{}

func (restartFault) Kind() string                   { return "restart" }
func (restartFault) Param() string                  { return "" }
func (restartFault) Inject(c *Cluster, n int) error { c.Stop(n); return nil }
func (restartFault) Heal(c *Cluster, n int) error   { return c.Start(n) }

// partitionFault isolates a node from every other through the fault hook
// of every node (both directions).
type partitionFault struct{}

func (partitionFault) Kind() string  { return "partition" }
func (partitionFault) Param() string { return "isolate" }
func (partitionFault) Inject(c *Cluster, n int) error {
	var others []string
	for i := range c.Nodes {
		if i+1 != n {
			others = append(others, strconv.Itoa(i+1))
			if err := c.Admin(i+1, "partition="+strconv.Itoa(n)); err != nil {
				return err
			}
		}
	}
	return c.Admin(n, "partition="+strings.Join(others, ","))
}
func (partitionFault) Heal(c *Cluster, n int) error {
	var first error
	for i := range c.Nodes {
		if err := c.Admin(i+1, "partition="); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// diskStallFault delays every storage commit of the node.
type diskStallFault struct{ delay time.Duration }

func (f diskStallFault) Kind() string  { return "disk-stall" }
func (f diskStallFault) Param() string { return f.delay.String() }
func (f diskStallFault) Inject(c *Cluster, n int) error {
	return c.Admin(n, "disk-stall="+f.delay.String())
}
func (f diskStallFault) Heal(c *Cluster, n int) error { return c.Admin(n, "disk-stall=0s") }

// cgroup v1 roots (this machine's kind) and the v2 unified root.
const (
	cgCPUv1 = "/sys/fs/cgroup/cpu"
	cgMemv1 = "/sys/fs/cgroup/memory"
	cgV2    = "/sys/fs/cgroup"
)

func cgroupV2() bool {
	_, err := os.Stat(filepath.Join(cgV2, "cgroup.controllers"))
	return err == nil
}

// CgroupsSupported reports whether CPU and memory faults can be injected.
func CgroupsSupported() error {
	dirs := []string{cgCPUv1, cgMemv1}
	if cgroupV2() {
		dirs = []string{cgV2}
	}
	for _, d := range dirs {
		probe := filepath.Join(d, fmt.Sprintf("cairn-probe-%d", os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			return fmt.Errorf("%w: cannot create a cgroup under %s: %v", ErrUnsupported, d, err)
		}
		os.Remove(probe)
	}
	return nil
}

// cgroupFault moves the node's process into a fresh cgroup with a limit.
type cgroupFault struct {
	cpu    float64 // fraction of one core (cpu fault)
	memory int64   // bytes (memory fault)
}

func (f cgroupFault) Kind() string {
	if f.cpu > 0 {
		return "slow-cpu"
	}
	return "memory"
}

func (f cgroupFault) Param() string {
	if f.cpu > 0 {
		return fmt.Sprintf("%.2f core", f.cpu)
	}
	return fmt.Sprintf("%d MB", f.memory>>20)
}

func (f cgroupFault) dir(n int) (root, dir string) {
	root = cgMemv1
	if f.cpu > 0 {
		root = cgCPUv1
	}
	if cgroupV2() {
		root = cgV2
	}
	return root, filepath.Join(root, fmt.Sprintf("cairn-chaos-%d-node%d", os.Getpid(), n))
}

func write(path, v string) error { return os.WriteFile(path, []byte(v), 0o644) }

func (f cgroupFault) Inject(c *Cluster, n int) error {
	if !c.Running(n) {
		return fmt.Errorf("chaos: node %d is not running", n)
	}
	_, dir := f.dir(n)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	var err error
	switch {
	case cgroupV2() && f.cpu > 0:
		err = write(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d 100000", int(f.cpu*100000)))
	case cgroupV2():
		err = write(filepath.Join(dir, "memory.max"), fmt.Sprint(f.memory))
	case f.cpu > 0:
		if err = write(filepath.Join(dir, "cpu.cfs_period_us"), "100000"); err == nil {
			err = write(filepath.Join(dir, "cpu.cfs_quota_us"), fmt.Sprint(int(f.cpu*100000)))
		}
	default:
		err = write(filepath.Join(dir, "memory.limit_in_bytes"), fmt.Sprint(f.memory))
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(c.Pid(n)))
}

func (f cgroupFault) Heal(c *Cluster, n int) error {
	root, dir := f.dir(n)
	if c.Running(n) {
		_ = write(filepath.Join(root, "cgroup.procs"), strconv.Itoa(c.Pid(n)))
	}
	// The limit may have killed the node (memory): start it again.
	var err error
	if !c.Running(n) {
		err = c.Start(n)
	}
	for i := 0; i < 50; i++ {
		if os.Remove(dir) == nil || os.IsNotExist(os.Remove(dir)) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}
