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
	"time"
)

// cgroup v1 roots (this machine's kind) and the v2 unified root.
const (
	cgCPUv1 = "/sys/fs/cgroup/cpu"
	cgMemv1 = "/sys/fs/cgroup/memory"
	cgV2    = "/sys/fs/cgroup"
)

// goLimitWait bounds the wait for a node to lower its Go soft memory limit
// after a memory fault: a node reads its cgroup's limit every 2 s.
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

// groupParent is where a fault's cgroup for a process in cgroup home goes.
// On v1 it is under home, so the group's charges still count towards
// home's limits and the node goes back to home when healed. On v2 it is
// the root: a v2 group that holds processes cannot hand the cpu or memory
// controller to a child ("no internal processes").
func groupParent(root, controller, home string) string {
	if controller == "" {
		return root
	}
	return filepath.Join(root, home)
}

// CgroupsSupported reports whether CPU and memory faults can be injected:
// a group can be created where the faults create theirs, with the files
// they write.
func CgroupsSupported() error {
	type probe struct {
		root, controller string
		files            []string
	}
	probes := []probe{{cgCPUv1, "cpu", []string{"cpu.cfs_quota_us"}}, {cgMemv1, "memory", []string{"memory.limit_in_bytes"}}}
	if cgroupV2() {
		probes = []probe{{cgV2, "", []string{"cpu.max", "memory.max"}}}
	}
	for _, p := range probes {
		home := "/"
		if p.controller != "" {
			var err error
			if home, err = cgroupOf("/proc/self/cgroup", p.controller); err != nil {
				return fmt.Errorf("%w: %v", ErrUnsupported, err)
			}
		}
		dir := filepath.Join(groupParent(p.root, p.controller, home), fmt.Sprintf("cairn-probe-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("%w: cannot create a cgroup under %s: %v", ErrUnsupported, filepath.Dir(dir), err)
		}
		for _, f := range p.files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				os.Remove(dir)
				return fmt.Errorf("%w: a new cgroup under %s has no %s (controller not enabled in cgroup.subtree_control?)", ErrUnsupported, filepath.Dir(dir), f)
			}
		}
		os.Remove(dir)
	}
	return nil
}

// cgroupFault moves the node's process into a fresh cgroup with a limit,
// and back to its own cgroup when healed.
//
// A memory limit set this way applies to memory the node charges after the
// move. The pages it already has stay charged to its old group unless the
// kernel moves them: on cgroup v1 the fault asks for that by writing 3
// (anonymous and mapped file pages) to the new group's
// memory.move_charge_at_immigrate before moving the process, but recent
// kernels have dropped the (deprecated) feature and refuse the write
// (Linux 6.18 answers EINVAL), and cgroup v2 never moves charges. The
// fault's note says which happened. Either way
// the node notices the limit: it sets Go's soft memory limit to 75 % of its
// cgroup's memory limit (re-read every 2 s), which counts its whole Go heap
// whatever the charges; the fault waits up to goLimitWait for that and
// notes the result, and notes at healing the group's peak usage, how often
// it hit the limit and whether the OOM killer struck.
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

// hierarchy returns the root of the fault's cgroup hierarchy and its v1
// controller ("" on v2).
func (f cgroupFault) hierarchy() (root, controller string) {
	switch {
	case cgroupV2():
		return cgV2, ""
	case f.cpu > 0:
		return cgCPUv1, "cpu"
	}
	return cgMemv1, "memory"
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
	pid := c.Pid(n)
	root, ctl := f.hierarchy()
	home, err := cgroupOf(fmt.Sprintf("/proc/%d/cgroup", pid), ctl)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	dir := filepath.Join(groupParent(root, ctl, home), fmt.Sprintf("cairn-chaos-%d-node%d", os.Getpid(), n))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	node := c.Node(n)
	node.cgHome, node.cgDir = filepath.Join(root, home), dir
	switch {
	case ctl == "" && f.cpu > 0:
		err = write(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d 100000", int(f.cpu*100000)))
	case ctl == "":
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
	if f.cpu > 0 {
		return write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	}
	return f.moveUnderMemoryLimit(c, n, pid, dir, home)
}

// moveUnderMemoryLimit moves the node into dir, with its charges where the
// kernel allows it, and waits for the node to notice the limit.
func (f cgroupFault) moveUnderMemoryLimit(c *Cluster, n, pid int, dir, home string) error {
	rss := rssBytes(pid)
	moveFile := filepath.Join(dir, "memory.move_charge_at_immigrate")
	moving := false
	switch {
	case cgroupV2():
		c.Notef("cgroup v2 does not move charges: the node's pages stay charged to %s, only new ones count against the limit", home)
	default:
		if _, err := os.Stat(moveFile); err != nil {
			c.Notef("charges not moved (no memory.move_charge_at_immigrate): the node's pages stay charged to %s, only new ones count against the limit", home)
		} else if err := write(moveFile, "3"); err != nil {
			c.Notef("charges not moved (memory.move_charge_at_immigrate=3: %s): the node's pages stay charged to %s, only new ones count against the limit", errText(err), home)
		} else {
			moving = true
		}
	}
	procs := filepath.Join(dir, "cgroup.procs")
	err := write(procs, strconv.Itoa(pid))
	if err != nil && moving {
		// The node's pages do not fit under the limit (the kernel could not
		// reclaim enough): move the process without them.
		c.Notef("charges not moved: RSS %d MB does not fit under the limit (%s)", rss>>20, errText(err))
		moving = false
		_ = write(moveFile, "0")
		err = write(procs, strconv.Itoa(pid))
	}
	if err != nil {
		return err
	}
	if moving {
		c.Notef("charges moved with the node (memory.move_charge_at_immigrate=3)")
	}
	if usage, ok := readInt(filepath.Join(dir, "memory.usage_in_bytes")); ok {
		c.Notef("RSS %d MB, %d MB charged to the new group", rss>>20, usage>>20)
	} else if usage, ok := readInt(filepath.Join(dir, "memory.current")); ok {
		c.Notef("RSS %d MB, %d MB charged to the new group", rss>>20, usage>>20)
	}
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
	node := c.Node(n)
	home, dir := node.cgHome, node.cgDir
	node.cgHome, node.cgDir = "", ""
	if f.memory > 0 && dir != "" {
		c.Notef("%s", memoryStats(dir))
		if !c.Running(n) {
			c.Notef("the node died under the limit")
		}
	}
	if c.Running(n) && home != "" {
		_ = write(filepath.Join(home, "cgroup.procs"), strconv.Itoa(c.Pid(n)))
	}
	// The limit may have killed the node (memory): start it again.
	var err error
	if !c.Running(n) {
		err = c.Start(n)
	}
	for i := 0; dir != "" && i < 50; i++ {
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
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
