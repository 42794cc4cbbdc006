package server

import (
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
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
// process's cgroup memory limit (v1 or v2), read again every memLimitPoll
// for the life of the process; with GOMEMLIMIT set it does nothing. Only
// `cairn serve` calls it (one node per process).
func followMemoryLimit(log *slog.Logger) {
	_, err := memlimit.SetGoMemLimitWithOpts(
		memlimit.WithRatio(memLimitShare),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithRefreshInterval(memLimitPoll),
		memlimit.WithLogger(log.With("component", "memlimit")),
	)
	if err != nil {
		log.Warn("the Go memory limit cannot follow the cgroup's", "err", err)
	}
}
