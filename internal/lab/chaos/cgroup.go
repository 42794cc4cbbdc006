package chaos

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup v1 roots (this machine's kind) and the v2 unified root.
const (
	cgCPUv1 = "/sys/fs/cgroup/cpu"
	cgMemv1 = "/sys/fs/cgroup/memory"
	cgV2    = "/sys/fs/cgroup"
)

// goLimitWait bounds the wait for a node to lower its Go soft memory limit
// after a memory fault: a node reads its cgroup's limit every 0.5 s.
const goLimitWait = 3 * time.Second

func cgroupV2() bool {
	_, err := os.Stat(filepath.Join(cgV2, "cgroup.controllers"))
	return err == nil
}

// cgroupOf reads a /proc/PID/cgroup file and returns the process's cgroup
// in the v1 hierarchy of controller, or in the unified (v2) hierarchy when
// controller is "".
func cgroupOf(procCgroup, controller string) (string, error) {
	raw, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" ||
			controller != "" && slices.Contains(strings.Split(parts[1], ","), controller) {
			return parts[2], nil
		}
	}
	what := controller
	if what == "" {
		what = "unified"
	}
	return "", fmt.Errorf("chaos: no %s cgroup in %s", what, procCgroup)
}

// groupParent is where the lab's group for a process in cgroup home goes.
// On v1 it is under home, so the group's charges still count towards
// home's limits. On v2 it is the root: a v2 group that holds processes
// cannot hand the cpu or memory controller to a child ("no internal
// processes").
func groupParent(root, controller, home string) string {
	if controller == "" {
		return root
	}
	return filepath.Join(root, home)
}

// CgroupsSupported reports whether CPU and memory faults can be injected:
// the groups a node runs in can be created, with the files the faults
// write.
func CgroupsSupported() error {
	g, err := newGroups(fmt.Sprintf("cairn-probe-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer g.remove()
	need := [][2]string{{g.cpu, "cpu.cfs_quota_us"}, {g.mem, "memory.limit_in_bytes"}}
	if g.v2 {
		need = [][2]string{{g.cpu, "cpu.max"}, {g.mem, "memory.max"}}
	}
	for _, n := range need {
		if _, err := os.Stat(filepath.Join(n[0], n[1])); err != nil {
			return fmt.Errorf("%w: a new cgroup under %s has no %s (controller not enabled in cgroup.subtree_control?)", ErrUnsupported, filepath.Dir(n[0]), n[1])
		}
	}
	return nil
}

// nodeGroups are the cgroups a node runs in from its start: on cgroup v1
// one in the cpu and one in the memory hierarchy (under the lab's own
// groups), on v2 one under the root (groupParent). Everything the
// node uses — its heap, Pebble's caches, the page cache of its files — is
// charged there, so a CPU quota or memory limit set on them covers the
// whole node. Restarts put the new process in the same groups.
type nodeGroups struct {
	v2       bool
	cpu, mem string // v1 directories (both the one directory on v2)

	lowering *lowering // a memory limit being lowered to its target; nil if none
}

// newNodeGroups creates node n's groups.
func newNodeGroups(n int) (*nodeGroups, error) {
	return newGroups(fmt.Sprintf("cairn-chaos-%d-node%d", os.Getpid(), n))
}

// newGroups creates the groups called name.
func newGroups(name string) (*nodeGroups, error) {
	mkdir := func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("%w: cannot create a cgroup under %s: %v", ErrUnsupported, filepath.Dir(dir), err)
		}
		return nil
	}
	if cgroupV2() {
		dir := filepath.Join(groupParent(cgV2, "", "/"), name)
		if err := mkdir(dir); err != nil {
			return nil, err
		}
		return &nodeGroups{v2: true, cpu: dir, mem: dir}, nil
	}
	g := &nodeGroups{}
	for _, h := range []struct {
		root, ctl string
		dir       *string
	}{{cgCPUv1, "cpu", &g.cpu}, {cgMemv1, "memory", &g.mem}} {
		home, err := cgroupOf("/proc/self/cgroup", h.ctl)
		if err != nil {
			g.remove()
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		dir := filepath.Join(groupParent(h.root, h.ctl, home), name)
		if err := mkdir(dir); err != nil {
			g.remove()
			return nil, err
		}
		*h.dir = dir
	}
	return g, nil
}

// enter moves process pid into the groups.
func (g *nodeGroups) enter(pid int) error {
	for _, dir := range g.dirs() {
		if err := write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (g *nodeGroups) dirs() []string {
	if g.v2 {
		return []string{g.cpu}
	}
	return []string{g.cpu, g.mem}
}

// remove deletes the groups (they must hold no process any more).
func (g *nodeGroups) remove() {
	for _, dir := range g.dirs() {
		for i := 0; dir != "" && i < 50; i++ {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// setCPU sets a quota of cores (0: none).
func (g *nodeGroups) setCPU(cores float64) error {
	quota := "-1"
	if cores > 0 {
		quota = strconv.Itoa(int(cores * 100000))
	}
	if g.v2 {
		if cores <= 0 {
			quota = "max"
		}
		return write(filepath.Join(g.cpu, "cpu.max"), quota+" 100000")
	}
	if err := write(filepath.Join(g.cpu, "cpu.cfs_period_us"), "100000"); err != nil {
		return err
	}
	return write(filepath.Join(g.cpu, "cpu.cfs_quota_us"), quota)
}

// setMemory sets a memory limit in bytes (0: none).
func (g *nodeGroups) setMemory(bytes int64) error {
	file, v := "memory.limit_in_bytes", "-1"
	if g.v2 {
		file, v = "memory.max", "max"
	}
	if bytes > 0 {
		v = strconv.FormatInt(bytes, 10)
	}
	return write(filepath.Join(g.mem, file), v)
}

// memoryUsage is what the node's memory group is charged now.
func (g *nodeGroups) memoryUsage() (int64, bool) {
	if v, ok := readInt(filepath.Join(g.mem, "memory.usage_in_bytes")); ok {
		return v, true
	}
	return readInt(filepath.Join(g.mem, "memory.current"))
}

// cgroupFault sets a CPU quota or a memory limit on the node's own
// cgroups (nodeGroups), and lifts it when healed.
//
// A memory limit covers all the node's memory, page cache included: the
// kernel reclaims what it can (page cache first) to get under it. When the
// node's unreclaimable memory is above the limit, cgroup v1 refuses the
// limit (EBUSY); the fault then holds the node at the memory it has and
// lowers the limit to its target as soon as the node gives memory back
// (cgrouplower.go), while v2 reclaims and, failing that, lets the OOM
// killer stop the node (the fault restarts it when healed). The node
// notices the limit either way: it sets Go's soft memory limit to 75 % and
// Pebble's cache and memtables to 50 % of its cgroup's limit (re-read
// every 0.5 s); the fault waits up to goLimitWait for the first and notes
// the result,
// and notes at healing the group's peak usage, how often it hit the limit
// and OOM kills.
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

func write(path, v string) error { return os.WriteFile(path, []byte(v), 0o644) }

// errText is the reason of a failed cgroup file operation, without the path.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func (f cgroupFault) Inject(c *Cluster, n int) error {
	if !c.Running(n) {
		return fmt.Errorf("chaos: node %d is not running", n)
	}
	g := c.groups[n-1]
	if g == nil {
		return fmt.Errorf("%w: node %d runs in no cgroup of the lab's", ErrUnsupported, n)
	}
	if f.cpu > 0 {
		return g.setCPU(f.cpu)
	}
	pid := c.Pid(n)
	rss := rssBytes(pid)
	usage, _ := g.memoryUsage()
	err := g.setMemory(f.memory)
	if errors.Is(err, syscall.EBUSY) {
		now, _ := g.memoryUsage()
		held := now + holdHeadroom
		c.Notef("the kernel could not reclaim the node's memory under %d MB (%s): held at its usage plus %d MB, %d MB, and lowered to the target as soon as the kernel takes it", f.memory>>20, errText(err), holdHeadroom>>20, held>>20)
		if err = g.setMemory(held); err == nil {
			g.lowering = startLowering(g, f.memory, held)
		}
	}
	if err != nil {
		return err
	}
	// v1: the peak and limit hits at healing count from here, the limit
	// in place (so the peak is what the node reached under it).
	g.resetStats()
	after, _ := g.memoryUsage()
	c.Notef("RSS %d MB; group charged %d MB before the limit, %d MB after", rss>>20, usage>>20, after>>20)
	start := time.Now()
	for {
		lim, heap, err := c.GoMemory(n)
		if err == nil && lim <= f.memory {
			c.Notef("Go soft limit %d MB after %.1f s (Go heap in use %d MB)", lim>>20, time.Since(start).Seconds(), heap>>20)
			return nil
		}
		if time.Since(start) > goLimitWait || !c.Running(n) {
			what := "unknown"
			switch {
			case err != nil:
				what = errText(err)
			case lim == math.MaxInt64:
				what = "none"
			default:
				what = fmt.Sprintf("%d MB", lim>>20)
			}
			c.Notef("the node did not lower its Go soft limit within %v (%s)", goLimitWait, what)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f cgroupFault) Heal(c *Cluster, n int) error {
	g := c.groups[n-1]
	if g == nil {
		return nil
	}
	var err error
	if f.cpu > 0 {
		err = g.setCPU(0)
	} else {
		if g.lowering != nil {
			c.Notef("%s", g.lowering.stop())
			g.lowering = nil
		}
		c.Notef("%s", memoryStats(g.mem))
		figs := readMemFigures(g.mem)
		figs.limit = f.memory
		if !c.Running(n) {
			c.Notef("the node died under the limit")
			figs.restarted = true
		}
		c.putMem(n, figs)
		err = g.setMemory(0)
		g.resetStats()
	}
	// The limit may have killed the node (memory): start it again.
	if !c.Running(n) {
		if serr := c.Start(n); err == nil {
			err = serr
		}
	}
	return err
}

// resetStats clears the v1 peak and failure counters, so the next
// fault's note counts its own.
func (g *nodeGroups) resetStats() {
	if g.v2 {
		return
	}
	_ = write(filepath.Join(g.mem, "memory.max_usage_in_bytes"), "0")
	_ = write(filepath.Join(g.mem, "memory.failcnt"), "0")
}

// memFigures are a memory fault's figures (FaultResult.PeakMemoryBytes
// and after): -1 where the kernel keeps no count.
type memFigures struct {
	peak, limit, hits, ooms int64
	restarted               bool
}

// readMemFigures reads a memory group's peak charge (v1: since the limit
// was set, so this fault's; v2: since the group was made, the node's
// start, preload included), how often it hit its limit and its OOM kills
// (v1: since the node's group was made).
func readMemFigures(dir string) memFigures {
	f := memFigures{peak: -1, hits: -1, ooms: -1}
	if v, ok := readInt(filepath.Join(dir, "memory.max_usage_in_bytes")); ok {
		f.peak = v
	} else if v, ok := readInt(filepath.Join(dir, "memory.peak")); ok {
		f.peak = v
	}
	if v, ok := readInt(filepath.Join(dir, "memory.failcnt")); ok {
		f.hits = v
	} else if v, ok := readKey(filepath.Join(dir, "memory.events"), "max"); ok {
		f.hits = v
	}
	if v, ok := readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill"); ok {
		f.ooms = v
	} else if v, ok := readKey(filepath.Join(dir, "memory.events"), "oom_kill"); ok {
		f.ooms = v
	}
	return f
}

// memoryStats summarises a memory group before it is removed: its peak
// usage, how often it hit its limit, and OOM kills.
func memoryStats(dir string) string {
	var parts []string
	if v, ok := readInt(filepath.Join(dir, "memory.max_usage_in_bytes")); ok { // v1
		parts = append(parts, fmt.Sprintf("group peak %d MB", v>>20))
	} else if v, ok := readInt(filepath.Join(dir, "memory.peak")); ok { // v2, Linux 5.19+
		parts = append(parts, fmt.Sprintf("group peak %d MB", v>>20))
	}
	if v, ok := readInt(filepath.Join(dir, "memory.failcnt")); ok { // v1
		parts = append(parts, fmt.Sprintf("limit hit %d times", v))
	} else if v, ok := readKey(filepath.Join(dir, "memory.events"), "max"); ok { // v2
		parts = append(parts, fmt.Sprintf("limit hit %d times", v))
	}
	if v, ok := readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill"); ok { // v1
		parts = append(parts, fmt.Sprintf("%d OOM kills", v))
	} else if v, ok := readKey(filepath.Join(dir, "memory.events"), "oom_kill"); ok { // v2
		parts = append(parts, fmt.Sprintf("%d OOM kills", v))
	}
	if len(parts) == 0 {
		return "no memory statistics"
	}
	return strings.Join(parts, ", ")
}

func readInt(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readKey reads the value of key in a file of "key value" lines.
func readKey(file, key string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// rssBytes is a process's resident set size (0 when unknown).
func rssBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
