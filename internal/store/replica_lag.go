package store

import "go.etcd.io/raft/v3/tracker"

// LeaderLearnerLags returns, when the local replica of shard id leads it,
// how many committed entries each learner lacks (node id -> entries), as
// the leader sees their progress; nil otherwise. A learner a new leader
// has not heard from yet (probing, match 0) is left out: no figure rather
// than a false one.
func (s *Store) LeaderLearnerLags(id uint64) map[uint64]uint64 {
	r := s.replica(id)
	if r == nil || !r.IsLeader() || len(r.Desc().Learners) == 0 {
		return nil
	}
	st := r.Status()
	out := map[uint64]uint64{}
	for _, n := range r.Desc().Learners {
		pr, ok := st.Progress[n]
		if !ok || (pr.Match == 0 && pr.State == tracker.StateProbe) {
			continue
		}
		out[n] = 0
		if st.Commit > pr.Match {
			out[n] = st.Commit - pr.Match
		}
	}
	return out
}
