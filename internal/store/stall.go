package store

import (
	"runtime"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
)

// A replica whose rounds have not taken its ticks for stallElections
// election timeouts has stopped: it sends no heartbeats, steps no
// message and answers no request. Raft cannot tell its peers (they see
// a leader gone quiet, or a follower that ignores them) and the node's
// other shards may go on, so the store says it: a warning for each such
// stall, with the shard's place in the scheduler, and with every
// goroutine's stack — what holds the replica — at most once per
// stallDumpEvery per store (a dump of a busy node is megabytes).
const (
	stallElections = 3
	stallDumpEvery = 10 * time.Minute
	// stallDumpBytes bounds the stacks one warning carries.
	stallDumpBytes = 1 << 20
)

// stallTicks is the pending tick count at which a replica is reported
// stalled.
func (s *Store) stallTicks() int { return stallElections * s.cfg.ElectionTick }

// reportStall warns that r has pending ticks its rounds did not take.
func (s *Store) reportStall(r *replica.Replica, pending int) {
	attrs := []any{"shard", r.ID(), "ticks_pending", pending,
		"for", time.Duration(pending) * s.cfg.TickInterval, "scheduler", s.sched.stateName(r.ID()),
		"queued_shards", len(s.sched.queue)}
	now := time.Now().UnixNano()
	if last := s.lastStallDump.Load(); (last == 0 || time.Duration(now-last) >= stallDumpEvery) && s.lastStallDump.CompareAndSwap(last, now) {
		buf := make([]byte, stallDumpBytes)
		attrs = append(attrs, "goroutines", string(buf[:runtime.Stack(buf, true)]))
	}
	s.cfg.Logger.Warn("replica stalled: its rounds have not run for three election timeouts", attrs...)
}
