package storage

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// FsyncHistogram is the distribution of the write-ahead log's fsync
// latencies since the engine opened, in seconds: Buckets maps each upper
// bound to the cumulative count of fsyncs at or under it.
type FsyncHistogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// WALFsyncHistogram reads Pebble's fsync latency histogram (recorded in
// nanoseconds) and converts it to seconds. It computes Pebble's metrics:
// call it at scrape time, not on a hot path.
func (e *Engine) WALFsyncHistogram() FsyncHistogram {
	out := FsyncHistogram{Buckets: map[float64]uint64{}}
	h := e.db.Metrics().LogWriter.FsyncLatency
	if h == nil {
		return out
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return out
	}
	ns := float64(time.Second)
	out.Count, out.Sum = m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()/ns
	for _, b := range m.Histogram.GetBucket() {
		out.Buckets[b.GetUpperBound()/ns] = b.GetCumulativeCount()
	}
	return out
}
