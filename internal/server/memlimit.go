package server

import (
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/cairn-db/cairn/internal/storage"
)

// GC and memory tuning of a node (see docs/performance.md, "Garbage
// collection", and docs/chaos.md, "Memory limits").
//
// A node's Go heap is small (Pebble keeps its block cache and memtables
// outside it), so the collector's default target of 100 % growth makes it
// run often for little gain: at GOGC=400 a node spends measurably less CPU
// per write. What bounds memory instead is the node's cgroup limit, which
// it follows while it runs (an operator's container limit, or cairn chaos's
// memory faults): Go does not read cgroup limits by itself, and Pebble's
// cache, sized when the node starts, does not shrink on its own either.
// Pebble's memtables cannot be resized once the engine is open: a node
// started under a limit sizes them for it (memTableSize).
const (
	// gcPercent is the node's GOGC unless the GOGC variable is set.
	gcPercent = 400
	// pebbleShare of the cgroup's memory limit is what Pebble's block cache
	// and memtables may hold together (storage.Engine.SetCacheBudget).
	pebbleShare = 0.35
	// goShareOutside of the limit becomes the Go soft limit when Pebble
	// allocates outside the Go heap (cgo builds); goShareInside when
	// Pebble's allocations are Go's own (builds without cgo), as the Go
	// limit then covers them too. The rest, about a third, is for the
	// binary, C's heap overhead, thread stacks and the page cache of the
	// node's files: a node at its budgets sits well under its limit, so
	// that it gives memory back when the limit falls below what it holds
	// (with 2 million records, shares of 45 % and 40 % kept a node at
	// 179 MB under a limit of 195 MB, which the chaos lab could not lower:
	// docs/chaos.md).
	goShareOutside = 0.3
	goShareInside  = 0.65
	// memLimitPoll is how often the cgroup limit is read again (limits can
	// change while a node runs).
	memLimitPoll = 500 * time.Millisecond
)

// tuneGC sets the node's GC percent unless the environment chose one.
func tuneGC(log *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	log.Debug("gc tuned", "gogc", gcPercent)
}

// goShare is the share of the cgroup's limit that becomes Go's soft limit.
func goShare() float64 {
	if storage.ManualInGoHeap {
		return goShareInside
	}
	return goShareOutside
}

// memTableSize is the memtable size for a node started under a cgroup
// memory limit of l bytes (0: none): a thirty-second of it, between 4 MiB
// and the default, so that the three memtables Pebble may hold stay under
// a tenth of the limit.
func memTableSize(l uint64) uint64 {
	if l == 0 {
		return storage.DefaultMemTableSize
	}
	return min(max(l/32, 4<<20), storage.DefaultMemTableSize)
}

// cgroupLimit is the process's cgroup memory limit in bytes (0: none).
func cgroupLimit() uint64 {
	l, err := memlimit.FromCgroup()
	if err != nil {
		return 0
	}
	return l
}

// followMemoryLimit reads the process's cgroup memory limit (v1 or v2)
// every memLimitPoll for the life of the process: it keeps the Go soft
// memory limit at goShare of it (unless GOMEMLIMIT is set), and calls
// budget with the bytes Pebble may hold (pebbleBudget) at once and
// whenever the limit changes. Only `cairn serve` calls it (one node per
// process).
func followMemoryLimit(log *slog.Logger, budget func(int64)) {
	_, err := memlimit.SetGoMemLimitWithOpts(
		memlimit.WithRatio(goShare()),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithRefreshInterval(memLimitPoll),
		memlimit.WithLogger(log.With("component", "memlimit")),
	)
	if err != nil {
		log.Warn("the Go memory limit cannot follow the cgroup's", "err", err)
	}
	go func() {
		last := int64(-1)
		for {
			if b := pebbleBudget(cgroupLimit()); b != last {
				budget(b)
				last = b
			}
			time.Sleep(memLimitPoll)
		}
	}()
}

// noLimit is the Pebble budget without a cgroup limit: as large as the
// cache the node opened with.
const noLimit = int64(1) << 62

// pebbleBudget is the bytes Pebble's cache and memtables may hold under a
// cgroup limit of l bytes.
func pebbleBudget(l uint64) int64 {
	if l == 0 || l >= uint64(noLimit) {
		return noLimit
	}
	return int64(float64(l) * pebbleShare)
}

// setPebbleBudget bounds the storage engine's cache and memtables to b
// bytes (noLimit: the size it opened with) and logs a change.
func (s *Server) setPebbleBudget(b int64) {
	before := s.eng.CacheBudget()
	if after := s.eng.SetCacheBudget(b); after != before {
		s.log.Info("storage cache budget changed", "bytes", after, "was", before)
	}
}
