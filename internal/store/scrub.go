package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Scrubbing (docs/scrub.md). Every ScrubInterval each shard's leader
// proposes a scrub entry; every replica that applies it pins an engine
// snapshot at that index (replica.Config.OnScrub) and the hasher hashes
// the shard's data there, per token sub-range. The replica then asks its
// peers for their hashes of the same scrub (wire.KindScrub) and judges:
// a replica whose hashes differ from those a majority of the voters agree
// on is reported and repairs itself — removed from its shard and added
// back, empty, so the leader sends it a snapshot. A replica opened over
// data that was on disk while the node was down is unverified (it serves
// no reads) until its first scrub agrees.

// unverifiedRetry: how often a scrub is proposed for a replica that is
// still unverified.
const unverifiedRetry = 2 * time.Second

// keptScrubs: scrub results kept per shard, for peers that ask late.
const keptScrubs = 4

// scrubJob is one replica's data at a scrub entry, waiting to be hashed.
type scrubJob struct {
	shard, id, index, start, end uint64
	snap                         *storage.Snapshot
}

// ScrubStats counts the node's scrubbing since it started.
type ScrubStats struct {
	// Scrubs: scrub entries whose data this node hashed.
	Scrubs uint64 `json:"scrubs"`
	// Mismatches: scrubs that found a local replica disagreeing with the
	// majority of its shard.
	Mismatches uint64 `json:"mismatches"`
	// Repairs: local replicas replaced by a snapshot after a mismatch;
	// RepairFailures: repairs that stopped with an error (retried at the
	// next mismatch).
	Repairs        uint64 `json:"repairs"`
	RepairFailures uint64 `json:"repair_failures"`
	// Inconclusive: scrubs where no root had a majority of the voters.
	Inconclusive uint64 `json:"inconclusive"`
	// ChecksumRuns and ChecksumErrors: sstable checksum verifications
	// run, and those that found a corrupt table.
	ChecksumRuns   uint64 `json:"checksum_runs"`
	ChecksumErrors uint64 `json:"checksum_errors"`
	// Unverified: local replicas not yet compared with their peers.
	Unverified int `json:"unverified"`
}

// ShardScrub is the last scrub of one local replica.
type ShardScrub struct {
	Index   uint64    `json:"index"`
	Keys    uint64    `json:"keys"`
	Root    string    `json:"root"`
	Outcome string    `json:"outcome"` // ScrubAgree, ScrubMismatch, ScrubInconclusive, ScrubRepaired
	Agree   int       `json:"agree"`   // voters holding the majority (or most common) root
	Leaves  []int     `json:"differing_ranges,omitempty"`
	Bad     []uint64  `json:"disagreeing_nodes,omitempty"`
	At      time.Time `json:"at"`
}

// scrubState is the store's scrubbing state.
type scrubState struct {
	sync.Mutex
	queue     []scrubJob
	wake      chan struct{}
	results   map[uint64][]wire.ScrubResult // by shard, newest last
	last      map[uint64]ShardScrub         // by shard
	proposed  map[uint64]time.Time          // unverified shards: last proposal
	repairing map[uint64]bool
	stats     ScrubStats
	// busy: scrubs of each shard queued, hashed or compared on this node
	// now; an unverified replica's next scrub is proposed only once its
	// last one is done (a large shard's hash takes longer than
	// unverifiedRetry, and every replica of the shard hashes each scrub).
	busy map[uint64]int
}

func (st *scrubState) init() {
	st.wake = make(chan struct{}, 1)
	st.results = map[uint64][]wire.ScrubResult{}
	st.last = map[uint64]ShardScrub{}
	st.proposed = map[uint64]time.Time{}
	st.busy = map[uint64]int{}
	st.repairing = map[uint64]bool{}
}

// queueScrub is every replica's OnScrub: it runs under the replica's
// lock, so it only queues the snapshot for the hasher.
func (s *Store) queueScrub(shardID, id, index, start, end uint64, snap *storage.Snapshot) {
	s.scrub.Lock()
	s.scrub.queue = append(s.scrub.queue, scrubJob{shard: shardID, id: id, index: index, start: start, end: end, snap: snap})
	s.scrub.busy[shardID]++
	s.scrub.Unlock()
	select {
	case s.scrub.wake <- struct{}{}:
	default:
	}
}

// scrubber proposes scrubs: every ScrubInterval (with up to 10 % jitter)
// on the shards this node leads, and every unverifiedRetry for its
// unverified replicas. Every ScrubInterval it also verifies the engine's
// sstable checksums.
func (s *Store) scrubber() {
	interval := s.cfg.ScrubInterval
	next := time.Now().Add(interval/2 + rand.N(interval/2+1))
	tick := time.NewTicker(min(interval, 250*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for _, r := range s.replicaList() {
			if r.Verified() {
				continue
			}
			s.scrub.Lock()
			due := s.scrub.busy[r.ID()] == 0 && now.Sub(s.scrub.proposed[r.ID()]) >= unverifiedRetry
			if due {
				s.scrub.proposed[r.ID()] = now
			}
			s.scrub.Unlock()
			if due {
				r.ProposeScrub(rand.Uint64())
			}
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(interval - interval/10 + rand.N(interval/5+1))
		for _, r := range s.replicaList() {
			if r.IsLeader() {
				r.ProposeScrub(rand.Uint64())
			}
		}
		s.verifyChecksums()
	}
}

// verifyChecksums checks every sstable's block checksums and reports a
// corrupt one.
func (s *Store) verifyChecksums() {
	n, err := s.cfg.Engine.VerifyChecksums(s.ctx)
	if errors.Is(err, context.Canceled) {
		return
	}
	s.scrub.Lock()
	s.scrub.stats.ChecksumRuns++
	if err != nil {
		s.scrub.stats.ChecksumErrors++
	}
	s.scrub.Unlock()
	if err != nil {
		s.cfg.Logger.Error("scrub: sstable checksum mismatch: the node's files are corrupt", "tables", n, "err", err)
	}
}

// hasher hashes the queued scrub snapshots one at a time (a scrub reads
// a shard's whole data; one at a time keeps it a background cost), then
// compares each result with the peers' on a goroutine of its own.
func (s *Store) hasher() {
	for {
		select {
		case <-s.scrub.wake:
		case <-s.ctx.Done():
			s.scrub.Lock()
			for _, j := range s.scrub.queue {
				j.snap.Close()
			}
			s.scrub.queue = nil
			s.scrub.Unlock()
			return
		}
		for {
			s.scrub.Lock()
			if len(s.scrub.queue) == 0 {
				s.scrub.Unlock()
				break
			}
			j := s.scrub.queue[0]
			s.scrub.queue = s.scrub.queue[1:]
			s.scrub.Unlock()
			leaves, keys, err := storage.DataHashes(j.snap, j.start, j.end, wire.ScrubLeaves)
			j.snap.Close()
			if err != nil {
				s.cfg.Logger.Error("scrub: hashing a replica", "shard", j.shard, "index", j.index, "err", err)
				s.scrubDone(j.shard)
				continue
			}
			res := wire.ScrubResult{ID: j.id, Index: j.index, Keys: keys, Root: rootOf(leaves), Leaves: leaves}
			s.scrub.Lock()
			rs := append(s.scrub.results[j.shard], res)
			if len(rs) > keptScrubs {
				rs = rs[len(rs)-keptScrubs:]
			}
			s.scrub.results[j.shard] = rs
			s.scrub.stats.Scrubs++
			s.scrub.Unlock()
			s.goFunc(func() { defer s.scrubDone(j.shard); s.compare(j.shard, res) })
		}
	}
}

// scrubDone ends a scrub of shardID counted busy by queueScrub.
func (s *Store) scrubDone(shardID uint64) {
	s.scrub.Lock()
	if s.scrub.busy[shardID]--; s.scrub.busy[shardID] <= 0 {
		delete(s.scrub.busy, shardID)
	}
	s.scrub.Unlock()
}

// scrubResult returns this node's result of scrub id of a shard.
func (s *Store) scrubResult(shardID, id uint64) (wire.ScrubResult, bool) {
	s.scrub.Lock()
	defer s.scrub.Unlock()
	for _, r := range s.scrub.results[shardID] {
		if r.ID == id {
			return r, true
		}
	}
	return wire.ScrubResult{}, false
}

// handleScrub answers a wire.KindScrub request.
func (s *Store) handleScrub(req *wire.Request) *wire.Response {
	r, ok := s.scrubResult(req.ShardID, req.Index)
	if !ok {
		return &wire.Response{Status: wire.StatusNotFound}
	}
	return &wire.Response{Status: wire.StatusOK, Value: r.Marshal()}
}

// compare collects the voters' results of the scrub mine belongs to
// (asking each peer until it has one, a root has a majority, or
// ScrubWait passes), judges, and reports; a local replica in the minority
// is repaired.
func (s *Store) compare(shardID uint64, mine wire.ScrubResult) {
	r := s.replica(shardID)
	if r == nil {
		return
	}
	voters := r.Desc().Replicas
	results := map[uint64]wire.ScrubResult{s.cfg.NodeID: mine}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ScrubWait)
	defer cancel()
	for len(results) < len(voters) && s.tr != nil {
		for _, v := range voters {
			if _, ok := results[v]; ok {
				continue
			}
			actx, acancel := context.WithTimeout(ctx, time.Second)
			resp, err := s.tr.Request(actx, v, &wire.Request{Kind: wire.KindScrub, Sender: s.cfg.NodeID, ShardID: shardID, Index: mine.ID})
			acancel()
			if err == nil && resp.Status == wire.StatusOK {
				var res wire.ScrubResult
				if res.Unmarshal(resp.Value) == nil && res.ID == mine.ID {
					results[v] = res
				}
			}
		}
		// A majority for one root settles it: a silent peer (down, cut
		// off) cannot change the outcome, so it is not waited for.
		if len(results) == len(voters) || judge(s.cfg.NodeID, voters, results).outcome != ScrubInconclusive {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	v := judge(s.cfg.NodeID, voters, results)
	s.report(r, mine, v)
}

// report records and logs a judged scrub and acts on it.
func (s *Store) report(r *replica.Replica, mine wire.ScrubResult, v verdict) {
	id := r.ID()
	if s.replica(id) != r {
		// The replica was replaced (repaired, or removed and added back)
		// while its peers were asked: the verdict is about data that is
		// gone.
		return
	}
	s.scrub.Lock()
	s.scrub.last[id] = ShardScrub{Index: mine.Index, Keys: mine.Keys, Root: hex16(mine.Root), Outcome: v.outcome,
		Agree: v.agree, Leaves: v.leaves, Bad: v.minority, At: time.Now()}
	repair := false
	switch v.outcome {
	case ScrubInconclusive:
		s.scrub.stats.Inconclusive++
	case ScrubMismatch:
		s.scrub.stats.Mismatches++
		repair = !s.scrub.repairing[id]
		s.scrub.repairing[id] = true
	}
	s.scrub.Unlock()
	switch v.outcome {
	case ScrubAgree:
		if !r.Verified() {
			s.cfg.Logger.Info("scrub: replica verified", "shard", id, "index", mine.Index, "keys", mine.Keys)
		}
		r.SetVerified(true)
		if len(v.minority) > 0 {
			s.cfg.Logger.Warn("scrub: other replicas disagree with the majority", "shard", id, "index", mine.Index, "nodes", v.minority)
		}
	case ScrubInconclusive:
		s.cfg.Logger.Warn("scrub: no majority of the voters agree", "shard", id, "index", mine.Index, "agree", v.agree)
	case ScrubMismatch:
		s.cfg.Logger.Error("scrub mismatch: this replica's data differs from the majority's; replacing it by a snapshot from the leader",
			"shard", id, "index", mine.Index, "ranges", v.leaves, "keys", mine.Keys)
		if repair {
			s.goFunc(func() { s.repair(id) })
		}
	}
}

func hex16(v uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// ScrubStats returns the node's scrub counters.
func (s *Store) ScrubStats() ScrubStats {
	s.scrub.Lock()
	st := s.scrub.stats
	s.scrub.Unlock()
	for _, r := range s.replicaList() {
		if !r.Verified() {
			st.Unverified++
		}
	}
	return st
}

// LastScrubs returns the last scrub of every local replica that had one,
// by shard.
func (s *Store) LastScrubs() map[uint64]ShardScrub {
	s.scrub.Lock()
	defer s.scrub.Unlock()
	out := make(map[uint64]ShardScrub, len(s.scrub.last))
	for id, l := range s.scrub.last {
		out[id] = l
	}
	return out
}
