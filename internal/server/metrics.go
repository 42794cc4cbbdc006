package server

import (
	"github.com/cairn-db/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exports node-level gauges and counters.
func registerMetrics(reg *prometheus.Registry, s *Server) {
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), newShardCollector(s), newQueueCollector(s), newLearnerCollector(s))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_storage_commits_total", Help: "Storage batches committed.",
	}, func() float64 { return float64(s.eng.Stats().Commits) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_storage_syncs_total", Help: "Storage batches committed with fsync.",
	}, func() float64 { return float64(s.eng.Stats().Syncs) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_storage_wal_fsyncs_total", Help: "fsyncs of the write-ahead log (Pebble merges concurrent synced commits).",
	}, func() float64 { return float64(s.eng.WALFsyncs()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_leader_writes_applied_total", Help: "Writes applied by this node while leading their shard.",
	}, func() float64 { return float64(s.store.LeaderApplied()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_lease_reads_total", Help: "Read index requests this node's leaders answered under their lease, without a quorum round (--lease-reads).",
	}, func() float64 { return float64(s.store.LeaseReads()) }))
	for i, reason := range store.DropReasons {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cairn_peer_messages_dropped_total", Help: "Raft messages from peers dropped before raft saw them.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(s.store.Dropped()[i]) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_requests_refused_total", Help: "Forwarded requests refused: key outside the shard or stale descriptor epoch.",
	}, func() float64 { return float64(s.coord.Refused()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_bad_frames_total", Help: "Peer frames that did not decode (their stream was closed).",
	}, func() float64 { return float64(s.tr.Stats().BadFrames) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_handler_panics_total", Help: "Peer handler panics recovered (their stream was closed).",
	}, func() float64 { return float64(s.tr.Stats().Panics) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_snapshots_refused_total", Help: "Incoming snapshot streams refused or cut.",
	}, func() float64 { return float64(s.tr.Stats().SnapshotsRefused) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_send_queue_drops_total", Help: "Raft messages dropped because a peer's send queue was full (in batches or bytes); raft retransmits them.",
	}, func() float64 { return float64(s.tr.Stats().QueueDrops) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_wrong_sender_total", Help: "Peer messages refused because their sender is not the node their certificate names.",
	}, func() float64 { return float64(s.tr.Stats().WrongSender) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_snapshots_sent_total", Help: "Snapshots streamed to other nodes.",
	}, func() float64 { return float64(s.store.SnapshotStats().Sent) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_snapshot_bytes_sent_total", Help: "Snapshot data bytes streamed to other nodes.",
	}, func() float64 { return float64(s.store.SnapshotStats().Bytes) }))
	registerScrubMetrics(reg, s.store)
	registerDiskMetrics(reg, s.disk)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cairn_replicas", Help: "Shard replicas on this node.",
	}, func() float64 { return float64(len(s.store.Replicas())) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cairn_leaders", Help: "Shard replicas on this node that are leaders.",
	}, func() float64 {
		n := 0
		for _, r := range s.store.Replicas() {
			if r.IsLeader() {
				n++
			}
		}
		return float64(n)
	}))
}

// registerScrubMetrics exports the scrubber's counters (docs/scrub.md).
func registerScrubMetrics(reg *prometheus.Registry, st *store.Store) {
	counter := func(name, help string, f func(store.ScrubStats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(st.ScrubStats())) }))
	}
	counter("cairn_scrubs_total", "Scrubs whose data a local replica hashed.", func(s store.ScrubStats) uint64 { return s.Scrubs })
	counter("cairn_scrub_mismatches_total", "Scrubs that found a local replica's data differing from its shard's majority.", func(s store.ScrubStats) uint64 { return s.Mismatches })
	counter("cairn_scrub_repairs_total", "Local replicas replaced by a snapshot from the leader after a scrub mismatch.", func(s store.ScrubStats) uint64 { return s.Repairs })
	counter("cairn_scrub_repair_failures_total", "Repairs after a scrub mismatch that stopped with an error.", func(s store.ScrubStats) uint64 { return s.RepairFailures })
	counter("cairn_scrub_inconclusive_total", "Scrubs where no hash had a majority of the shard's voters.", func(s store.ScrubStats) uint64 { return s.Inconclusive })
	counter("cairn_scrub_checksum_errors_total", "SSTable checksum verifications that found a corrupt table.", func(s store.ScrubStats) uint64 { return s.ChecksumErrors })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cairn_scrub_unverified_replicas", Help: "Local replicas opened from disk and not yet found equal to their shard's majority (they serve no reads).",
	}, func() float64 { return float64(st.ScrubStats().Unverified) }))
}
