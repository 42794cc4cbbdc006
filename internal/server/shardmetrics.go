package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// shardCollector exports, at scrape time, what the alerting rules in
// deploy/prometheus watch: whether each replica knows its shard's leader,
// how far each follower is behind (as its leader sees it), each replica's
// applied index, and the write-ahead log's fsync latencies.
type shardCollector struct {
	s *Server

	hasLeader, applied, lag, fsync *prometheus.Desc
	written, blobFiles, blobBytes  *prometheus.Desc
	l0Sublevels                    *prometheus.Desc
	cacheBudget, cacheUsed         *prometheus.Desc
}

func newShardCollector(s *Server) *shardCollector {
	return &shardCollector{s: s,
		hasLeader: prometheus.NewDesc("cairn_shard_has_leader",
			"1 when this node's replica of the shard knows a leader, else 0.", []string{"shard"}, nil),
		applied: prometheus.NewDesc("cairn_replica_applied_index",
			"Raft index applied by this node's replica of the shard.", []string{"shard"}, nil),
		lag: prometheus.NewDesc("cairn_replica_lag_entries",
			"Entries a follower lacks of its leader's log, reported by the leader (the shard's leader only).", []string{"shard", "follower"}, nil),
		fsync: prometheus.NewDesc("cairn_wal_fsync_duration_seconds",
			"Latency of the write-ahead log's fsyncs.", nil, nil),
		written: prometheus.NewDesc("cairn_storage_bytes_written_total",
			"Bytes the storage engine wrote to disk, by kind (wal, flush, compaction, ingest): with the bytes acknowledged, the write amplification.", []string{"kind"}, nil),
		blobFiles: prometheus.NewDesc("cairn_storage_blob_files",
			"Live blob files (values kept out of the LSM's sstables).", nil, nil),
		blobBytes: prometheus.NewDesc("cairn_storage_blob_bytes",
			"Size of the live blob files.", nil, nil),
		l0Sublevels: prometheus.NewDesc("cairn_storage_l0_sublevels",
			"Sublevels in the LSM's L0 (its read amplification): compacted at 20, writes stop at 40.", nil, nil),
		cacheBudget: prometheus.NewDesc("cairn_storage_cache_budget_bytes",
			"What the block cache and memtables may hold together: the configured cache size, or less under a cgroup memory limit.", nil, nil),
		cacheUsed: prometheus.NewDesc("cairn_storage_cache_bytes",
			"Bytes of blocks the block cache holds.", nil, nil),
	}
}

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hasLeader
	ch <- c.applied
	ch <- c.lag
	ch <- c.fsync
	ch <- c.written
	ch <- c.blobFiles
	ch <- c.blobBytes
	ch <- c.l0Sublevels
	ch <- c.cacheBudget
	ch <- c.cacheUsed
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	for id, r := range c.s.store.Replicas() {
		shard := strconv.FormatUint(id, 10)
		known := 0.0
		if r.Leader() != 0 {
			known = 1
		}
		ch <- prometheus.MustNewConstMetric(c.hasLeader, prometheus.GaugeValue, known, shard)
		ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(r.Applied()), shard)
		if !r.IsLeader() {
			continue
		}
		_, last := r.LogBounds()
		for node, pr := range r.Status().Progress {
			if node == c.s.store.NodeID() {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lagOf(last, pr.Match)), shard, strconv.FormatUint(node, 10))
		}
	}
	h := c.s.eng.WALFsyncHistogram()
	ch <- prometheus.MustNewConstHistogram(c.fsync, h.Count, h.Sum, h.Buckets)
	w := c.s.eng.WriteStats()
	for kind, n := range map[string]uint64{"wal": w.WAL, "flush": w.Flushed, "compaction": w.Compacted, "ingest": w.Ingested} {
		ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(c.blobFiles, prometheus.GaugeValue, float64(w.BlobFiles))
	ch <- prometheus.MustNewConstMetric(c.blobBytes, prometheus.GaugeValue, float64(w.BlobBytes))
	ch <- prometheus.MustNewConstMetric(c.l0Sublevels, prometheus.GaugeValue, float64(w.L0Sublevels))
	ch <- prometheus.MustNewConstMetric(c.cacheBudget, prometheus.GaugeValue, float64(c.s.eng.CacheBudget()))
	ch <- prometheus.MustNewConstMetric(c.cacheUsed, prometheus.GaugeValue, float64(c.s.eng.CacheSize()))
}

// lagOf is how many entries of a log ending at last a follower that holds
// the log up to match lacks.
func lagOf(last, match uint64) uint64 {
	if match >= last {
		return 0
	}
	return last - match
}
