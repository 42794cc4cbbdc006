package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// learnerCollector exports a node's learners' lag and the reads they
// served (read replicas, docs/operations.md). The leader's view of every
// follower and learner is cairn_replica_lag_entries (shardmetrics.go).
type learnerCollector struct {
	s                  *Server
	lag, maxLag, reads *prometheus.Desc
}

func newLearnerCollector(s *Server) *learnerCollector {
	return &learnerCollector{s: s,
		lag: prometheus.NewDesc("cairn_read_replica_lag_entries",
			"Entries this node's learner replica of the shard has applied fewer than its leader (asked once a second).", []string{"shard"}, nil),
		maxLag: prometheus.NewDesc("cairn_read_replica_max_lag_entries",
			"The largest cairn_read_replica_lag_entries of this node.", nil, nil),
		reads: prometheus.NewDesc("cairn_read_replica_reads_total",
			"Reads this node served from its own learner replicas.", nil, nil),
	}
}

func (c *learnerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.maxLag
	ch <- c.reads
}

func (c *learnerCollector) Collect(ch chan<- prometheus.Metric) {
	lags := c.s.coord.LearnerLags()
	var m uint64
	for _, l := range lags {
		m = max(m, l.Entries)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(l.Entries), strconv.FormatUint(l.Shard, 10))
	}
	if len(lags) > 0 || c.s.coord.ReadReplica() {
		ch <- prometheus.MustNewConstMetric(c.maxLag, prometheus.GaugeValue, float64(m))
	}
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(c.s.coord.LearnerReads()))
}
