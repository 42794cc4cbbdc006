package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// queueCollector exports each shard's request queue on this node (the
// per-shard soft limits, internal/kv/softlimit.go): its depth now and
// the requests refused over the limit.
type queueCollector struct {
	s               *Server
	depth, rejected *prometheus.Desc
}

func newQueueCollector(s *Server) *queueCollector {
	return &queueCollector{s: s,
		depth: prometheus.NewDesc("cairn_shard_queue_depth",
			"Requests for the shard this node is working on now (client requests it coordinates and requests other nodes forwarded to it).", []string{"shard"}, nil),
		rejected: prometheus.NewDesc("cairn_shard_soft_limit_rejections_total",
			"Requests for the shard refused with 503 because its queue on this node was at --shard-soft-limit.", []string{"shard"}, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.rejected
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.coord == nil {
		return
	}
	seen := map[uint64]bool{}
	for _, q := range c.s.coord.ShardQueues() {
		seen[q.Shard] = true
		shard := strconv.FormatUint(q.Shard, 10)
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Depth), shard)
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(q.Rejected), shard)
	}
	// Shards this node holds but has not served yet: empty queues.
	for id := range c.s.store.Replicas() {
		if !seen[id] {
			shard := strconv.FormatUint(id, 10)
			ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, 0, shard)
			ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, 0, shard)
		}
	}
}

// DefaultShardSoftLimit is cairn serve's --shard-soft-limit: a quarter of
// the node's default in-flight bound (--max-inflight 4096), so one slow
// or stuck shard holds at most a quarter of the node's requests while
// the others keep three quarters. It is far above what an even load
// queues per shard (1000 clients spread over three nodes and their
// shards queue tens per shard), so only a shard that falls behind the
// rest meets it.
const DefaultShardSoftLimit = 1024
