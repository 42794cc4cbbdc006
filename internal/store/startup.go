package store

import (
	"time"

	"github.com/cairn-db/cairn/internal/replica"
)

// Startup timing (docs/performance.md, "Restart time"). openReplicas notes
// how long opening the local replicas took and how many committed entries
// they had not applied yet (a replica's applied index is written in the
// same batch as the writes of the entries it covers, so only the entries
// above it are applied again). After Start, startupWatch logs once when
// those entries are applied, when every replica knows a leader, and when
// every replica opened over data from disk has been verified by a scrub
// (until then reads of its shard go to its peers).

// startupInfo is what openReplicas saw.
type startupInfo struct {
	opened time.Duration
	// commit: each replica's commit index when it opened; pending: the
	// committed entries above the replicas' applied indexes then.
	commit         map[uint64]uint64
	pending, count uint64
}

// noteOpened records the opened replicas, their entries left to apply, and
// logs them.
func (s *Store) noteOpened(began time.Time) {
	info := startupInfo{opened: time.Since(began), commit: map[uint64]uint64{}}
	for id, r := range s.mu.replicas {
		c := r.Status().Commit
		info.commit[id] = c
		if a := r.Applied(); c > a {
			info.pending += c - a
		}
		info.count++
	}
	s.startup = info
	s.cfg.Logger.Info("startup: opened the local replicas", "replicas", info.count,
		"took", info.opened.Round(time.Microsecond).String(), "committed_entries_to_apply", info.pending)
}

// startupWatch logs the startup milestones (see above); it polls every
// 10 ms and ends when all are logged, the store stops, or five minutes
// (then it logs what is still missing) have passed.
func (s *Store) startupWatch() {
	began := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	applied, leaders, verified := false, false, false
	for !applied || !leaders || !verified {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		rs := s.replicaList()
		took := time.Since(began).Round(time.Millisecond).String()
		if !applied && all(rs, func(r *replica.Replica) bool { return r.Applied() >= s.startup.commit[r.ID()] }) {
			applied = true
			s.cfg.Logger.Info("startup: applied the committed entries left at restart",
				"entries", s.startup.pending, "took", took)
		}
		if !leaders && all(rs, func(r *replica.Replica) bool { return r.Leader() != 0 }) {
			leaders = true
			s.cfg.Logger.Info("startup: every local replica knows its leader", "took", took)
		}
		if !verified && all(rs, (*replica.Replica).Verified) {
			verified = true
			s.cfg.Logger.Info("startup: every local replica is verified (serves local reads)", "took", took)
		}
		if time.Since(began) > 5*time.Minute {
			s.cfg.Logger.Warn("startup: not done after five minutes", "applied", applied, "leaders", leaders, "verified", verified)
			return
		}
	}
}

func all(rs []*replica.Replica, f func(*replica.Replica) bool) bool {
	for _, r := range rs {
		if !f(r) {
			return false
		}
	}
	return true
}
