package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultDiskReserve is the free space a node keeps on its data
// directory's filesystem by default: below it, the node refuses new
// values, so the storage engine itself never meets a full disk.
const DefaultDiskReserve = 64 << 20

// diskGuard decides whether the node takes new values. It refuses them
// (kv.DiskState.Refusing) while the data directory's filesystem has less
// free space than the reserve, or the fault hook says the disk is full
// (disk_full), or the engine's files take more than the quota
// (quota_exceeded). Deletes and reads are always served; the node's
// followers keep appending (the reserve is there for them); and every
// check, the guard hands the node's leaderships to other replicas, so
// the shards keep taking writes through the other nodes.
type diskGuard struct {
	dir      string
	reserve  uint64 // 0: no free-space check
	quota    uint64 // 0: none
	usage    func() uint64
	statfs   func(dir string) (free uint64, err error)
	injected atomic.Bool
	mu       sync.Mutex // serializes check
	state    atomic.Pointer[kv.DiskState]
	log      *slog.Logger
}

func newDiskGuard(dir string, reserve, quota uint64, usage func() uint64, log *slog.Logger) *diskGuard {
	g := &diskGuard{dir: dir, reserve: reserve, quota: quota, usage: usage, statfs: freeBytes, log: log}
	g.state.Store(&kv.DiskState{ReserveBytes: reserve, QuotaBytes: quota})
	return g
}

// freeBytes is the space of dir's filesystem an unprivileged user may
// still take.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// snapshotFree is the free space incoming snapshots may count on (the
// peer transport's Config.DiskFree, with the guard's reserve): none
// while the disk-full fault is injected, else the filesystem's, measured
// afresh — a snapshot may bring gigabytes between two checks.
func (g *diskGuard) snapshotFree() (uint64, error) {
	if g.injected.Load() {
		return 0, nil
	}
	return g.statfs(g.dir)
}

// State is the last finding.
func (g *diskGuard) State() kv.DiskState { return *g.state.Load() }

// Inject makes the disk look full (on) or lifts that, and checks at once.
func (g *diskGuard) Inject(on bool) kv.DiskState {
	g.injected.Store(on)
	return g.check()
}

// check measures, stores and returns the state, logging a change.
func (g *diskGuard) check() kv.DiskState {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.State()
	st := kv.DiskState{Injected: g.injected.Load(), ReserveBytes: g.reserve, QuotaBytes: g.quota, FreeBytes: prev.FreeBytes}
	if free, err := g.statfs(g.dir); err == nil {
		st.FreeBytes = free
	} else {
		g.log.Warn("disk guard: statfs", "dir", g.dir, "err", err)
	}
	st.UsedBytes = g.usage()
	switch {
	case st.Injected || (g.reserve > 0 && st.FreeBytes < g.reserve):
		st.Refusing = kv.DiskFull
	case g.quota > 0 && st.UsedBytes > g.quota:
		st.Refusing = kv.QuotaExceeded
	}
	if st.Refusing != prev.Refusing {
		if st.Refusing != "" {
			g.log.Warn("disk guard: refusing new values", "reason", st.Refusing, "injected", st.Injected,
				"free", st.FreeBytes, "reserve", g.reserve, "used", st.UsedBytes, "quota", g.quota)
		} else {
			g.log.Info("disk guard: taking new values again", "free", st.FreeBytes, "used", st.UsedBytes)
		}
	}
	g.state.Store(&st)
	return st
}

// diskGuardInterval is how often the guard measures.
const diskGuardInterval = time.Second

// runDiskGuard checks every diskGuardInterval until ctx ends, and while
// the node refuses new values hands its leaderships away.
func (s *Server) runDiskGuard(ctx context.Context) {
	t := time.NewTicker(diskGuardInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if s.disk.check().Refusing != "" {
			s.handLeadershipsAway("disk guard")
		}
	}
}

// handLeadershipsAway asks each shard this node leads to move its
// leadership to the reachable, recently active follower with the most of
// the log (raft catches it up first).
func (s *Server) handLeadershipsAway(why string) {
	for _, r := range s.store.Replicas() {
		if !r.IsLeader() {
			continue
		}
		st := r.Status()
		var best, bestMatch uint64
		for id, pr := range st.Progress {
			if id == s.cfg.NodeID || !pr.RecentActive || !s.tr.Reachable(id) {
				continue
			}
			if pr.Match >= bestMatch {
				best, bestMatch = id, pr.Match
			}
		}
		if best != 0 {
			s.log.Warn(why+": handing leadership over", "shard", r.ID(), "to", best)
			r.TransferLeadership(best)
		}
	}
}

// registerDiskMetrics exports the disk guard's last finding.
func registerDiskMetrics(reg *prometheus.Registry, g *diskGuard) {
	for _, reason := range []string{kv.DiskFull, kv.QuotaExceeded} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cairn_disk_refusing_writes", Help: "1 while the node answers new values with 507 for this reason.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 {
			if g.State().Refusing == reason {
				return 1
			}
			return 0
		}))
	}
	for name, help := range map[string]string{
		"cairn_disk_free_bytes":     "Free space of the data directory's filesystem (unprivileged), at the last check.",
		"cairn_disk_reserve_bytes":  "Free space below which the node refuses new values (0: no check).",
		"cairn_storage_used_bytes":  "Bytes the storage engine's files take, at the last check.",
		"cairn_storage_quota_bytes": "Storage use past which the node refuses new values (0: no quota).",
	} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			st := g.State()
			return float64(map[string]uint64{"cairn_disk_free_bytes": st.FreeBytes, "cairn_disk_reserve_bytes": st.ReserveBytes,
				"cairn_storage_used_bytes": st.UsedBytes, "cairn_storage_quota_bytes": st.QuotaBytes}[name])
		}))
	}
}
