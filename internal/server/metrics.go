package server

import (
	"github.com/cairn-db/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exports node-level gauges and counters.
func registerMetrics(reg *prometheus.Registry, s *Server) {
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), newShardCollector(s), newQueueCollector(s))
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
		Name: "cairn_snapshots_sent_total", Help: "Snapshots streamed to other nodes.",
	}, func() float64 { return float64(s.store.SnapshotStats().Sent) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_snapshot_bytes_sent_total", Help: "Snapshot data bytes streamed to other nodes.",
	}, func() float64 { return float64(s.store.SnapshotStats().Bytes) }))
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
