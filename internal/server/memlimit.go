package server

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GC tuning of a node (see docs/performance.md, "Garbage collection").
//
// A node's Go heap is small (Pebble keeps its block cache and memtables
// outside it), so the collector's default target of 100 % growth makes it
// run often for little gain: at GOGC=400 a node spends measurably less CPU
// per write. What bounds memory instead is the soft limit, which a node
// takes from its cgroup: Go does not read cgroup memory limits by itself,
// and a node whose container is squeezed (cairn chaos's memory scenarios, or
// an operator's limit) should collect harder rather than be OOM-killed.
const (
	// gcPercent is the node's GOGC unless the GOGC variable is set.
	gcPercent = 400
	// memLimitShare of the cgroup's memory limit becomes the Go soft limit,
	// leaving the rest for Pebble's manual allocations and the page cache.
	memLimitShare = 0.75
	// memLimitPoll is how often the cgroup limit is read again (limits can
	// change while a node runs).
	memLimitPoll = 2 * time.Second
)

// tuneGC sets the node's GC percent unless the environment chose one.
func tuneGC(log *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	log.Debug("gc tuned", "gogc", gcPercent)
}

// followMemoryLimit keeps the Go soft memory limit at memLimitShare of the
// process's cgroup memory limit until ctx ends. With GOMEMLIMIT set it does
// nothing.
func followMemoryLimit(ctx context.Context, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var cur int64 = math.MaxInt64
	t := time.NewTicker(memLimitPoll)
	defer t.Stop()
	for {
		want := int64(math.MaxInt64)
		if lim, ok := cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup"); ok {
			want = int64(float64(lim) * memLimitShare)
		}
		if want != cur {
			debug.SetMemoryLimit(want)
			log.Info("go memory limit follows the cgroup", "limit_bytes", want)
			cur = want
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// cgroupMemoryLimit reads the memory limit of the cgroup the process is in
// (procCgroup is /proc/self/cgroup, root the cgroup mount point), cgroup
// v2 or v1. ok is false when there is no limit or it cannot be read.
func cgroupMemoryLimit(procCgroup, root string) (limit int64, ok bool) {
	raw, err := os.ReadFile(procCgroup)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join(root, parts[2], "memory.max")
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes")
		default:
			continue
		}
		if n, ok := readLimit(file); ok {
			return n, true
		}
	}
	return 0, false
}

// readLimit parses a cgroup limit file; "max" and v1's huge "unlimited"
// values are no limit.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}
