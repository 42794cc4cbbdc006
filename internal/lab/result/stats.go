package result

import (
	"context"
	"errors"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to 60 s, 3 significant
// digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

type second struct {
	n, errors uint64
	hist      *hdrhistogram.Histogram
}

type opStats struct {
	hist *hdrhistogram.Histogram
	// answered: the time of the attempt that was answered (from when it
	// was sent), for operations refused (503) and tried again.
	answered *hdrhistogram.Histogram
	n        uint64
	errors   uint64
	notFound uint64
	// refused: 503 answers waited out and tried again (Refused);
	// retried: completed operations refused at least once.
	refused, retried uint64
	errKinds         map[string]uint64
	seconds          map[int]*second
}

func newOpStats() *opStats {
	return &opStats{hist: newHist(), answered: newHist(), errKinds: map[string]uint64{}, seconds: map[int]*second{}}
}

// Recorder collects results of one run. Safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	start time.Time // measurement start
	ops   map[string]*opStats
	all   *opStats
	kind  func(error) string
}

// ErrNotFound is a read of an absent key: counted apart, not as an error.
var ErrNotFound = errors.New("result: not found")

// NewRecorder starts measuring at start. kind names an error's class in
// the "errors by kind" report (nil: "timeout", "network" or "other").
func NewRecorder(start time.Time, kind func(error) string) *Recorder {
	if kind == nil {
		kind = ErrKind
	}
	return &Recorder{start: start, ops: map[string]*opStats{}, all: newOpStats(), kind: kind}
}

// ErrKind classifies the errors every client has: "timeout", "network"
// or "other".
func ErrKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne):
		return "network"
	}
	return "other"
}

func (s *opStats) add(sec int, us, answeredUs int64, err error, kind string) {
	sc := s.seconds[sec]
	if sc == nil {
		sc = &second{hist: newHist()}
		s.seconds[sec] = sc
	}
	if err != nil {
		s.errors++
		s.errKinds[kind]++
		sc.errors++
		return
	}
	_ = s.hist.RecordValue(us)
	_ = s.answered.RecordValue(answeredUs)
	_ = sc.hist.RecordValue(us)
	s.n++
	sc.n++
}

// Record one completed operation that was due at intended and ended at end.
// Operations due before the measurement start (warm-up) are dropped.
func (r *Recorder) Record(name string, intended, end time.Time, err error) {
	r.RecordRetried(name, intended, intended, end, err)
}

// RecordRetried records an operation whose final attempt was sent at
// lastSent: after intended when it was refused (503, see Refused),
// waited and tried again. Its latency runs from intended to end, the
// waits included (what its client saw); its answered latency from
// lastSent to end (the server's time for the attempt it answered, as
// Record's latency is for an operation never refused).
func (r *Recorder) RecordRetried(name string, intended, lastSent, end time.Time, err error) {
	if intended.Before(r.start) {
		return
	}
	us := max(end.Sub(intended).Microseconds(), 1)
	answeredUs := max(end.Sub(lastSent).Microseconds(), 1)
	sec := int(end.Sub(r.start) / time.Second)
	var kind string
	notFound := errors.Is(err, ErrNotFound)
	if notFound {
		err = nil
	}
	if err != nil {
		kind = r.kind(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.op(name)
	o.add(sec, us, answeredUs, err, kind)
	r.all.add(sec, us, answeredUs, err, kind)
	if notFound {
		o.notFound++
		r.all.notFound++
	}
	if lastSent.After(intended) {
		o.retried++
		r.all.retried++
	}
}

// Refused counts one 503 answer (the node's or a shard's queue was full)
// to an attempt of an operation due at intended, which its client waits
// out and tries again: not an error. Dropped in the warm-up.
func (r *Recorder) Refused(name string, intended time.Time) {
	if intended.Before(r.start) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.op(name).refused++
	r.all.refused++
}

// op is name's stats, made on first use. r.mu held.
func (r *Recorder) op(name string) *opStats {
	o := r.ops[name]
	if o == nil {
		o = newOpStats()
		r.ops[name] = o
	}
	return o
}

// Start is when the measurement starts.
func (r *Recorder) Start() time.Time { return r.start }

// Progress is a snapshot of the run so far: completed ops, errors, p99
// in ms.
func (r *Recorder) Progress() (n, errs uint64, p99 float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.all.n, r.all.errors, float64(r.all.hist.ValueAtQuantile(99)) / 1000
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P75  float64 `json:"p75"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(v int64) float64 { return float64(v) / 1000 }
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Mean: h.Mean() / 1000, Min: ms(h.Min()), P50: ms(h.ValueAtQuantile(50)), P75: ms(h.ValueAtQuantile(75)),
		P90: ms(h.ValueAtQuantile(90)), P95: ms(h.ValueAtQuantile(95)), P99: ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()),
	}
}

// Point is one second of the time series.
type Point struct {
	Second     int     `json:"second"`
	Ops        uint64  `json:"ops"`
	Errors     uint64  `json:"errors"`
	Throughput float64 `json:"throughput"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Mean       float64 `json:"mean_ms"`
	Min        float64 `json:"min_ms"`
	P95        float64 `json:"p95_ms"`
	P999       float64 `json:"p999_ms"`
	Max        float64 `json:"max_ms"`
}

// seriesOf lists the whole seconds of the run; the partial last second
// (operations finishing after the end) is left out.
func seriesOf(o *opStats, whole int) []Point {
	secs := make([]int, 0, len(o.seconds))
	for s := range o.seconds {
		if s < whole || whole == 0 {
			secs = append(secs, s)
		}
	}
	sort.Ints(secs)
	out := make([]Point, 0, len(secs))
	for _, s := range secs {
		sc := o.seconds[s]
		l := latencyOf(sc.hist)
		out = append(out, Point{Second: s + 1, Ops: sc.n, Errors: sc.errors, Throughput: float64(sc.n),
			P50: l.P50, P99: l.P99, Mean: l.Mean, Min: l.Min, P95: l.P95, P999: l.P999, Max: l.Max})
	}
	return out
}

// OpResult summarises one operation name.
type OpResult struct {
	Ops        uint64            `json:"ops"`
	Errors     uint64            `json:"errors"`
	NotFound   uint64            `json:"not_found"`
	ErrorKinds map[string]uint64 `json:"error_kinds"`
	// Refused: 503 answers waited out and tried again (not errors);
	// Retried: operations refused at least once.
	Refused    uint64  `json:"refused"`
	Retried    uint64  `json:"retried"`
	Throughput float64 `json:"throughput"`
	// Latency runs from when the operation was due to its final answer,
	// the waits after refusals included; AnsweredLatency from when the
	// attempt that got the final answer was sent (the same as Latency
	// for an operation never refused).
	Latency         Latency  `json:"latency_ms"`
	AnsweredLatency Latency  `json:"answered_latency_ms"`
	Histogram       []Bucket `json:"histogram"`
	Series          []Point  `json:"series"`
}

// Bucket is one bar of a latency histogram (values in ms).
type Bucket struct {
	UpToMs float64 `json:"up_to_ms"`
	Count  int64   `json:"count"`
}

func bucketsOf(h *hdrhistogram.Histogram) []Bucket {
	var out []Bucket
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		out = append(out, Bucket{UpToMs: float64(bar.To) / 1000, Count: bar.Count})
	}
	return coarsen(out, 200)
}

// coarsen merges adjacent buckets so at most n remain.
func coarsen(b []Bucket, n int) []Bucket {
	if len(b) <= n {
		return b
	}
	step := (len(b) + n - 1) / n
	var out []Bucket
	for i := 0; i < len(b); i += step {
		m := Bucket{}
		for j := i; j < i+step && j < len(b); j++ {
			m.Count += b[j].Count
			m.UpToMs = b[j].UpToMs
		}
		out = append(out, m)
	}
	return out
}

// Results summarises everything recorded over elapsed.
func (r *Recorder) Results(elapsed time.Duration) (OpResult, map[string]OpResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	conv := func(o *opStats) OpResult {
		return OpResult{Ops: o.n, Errors: o.errors, NotFound: o.notFound, ErrorKinds: o.errKinds,
			Refused: o.refused, Retried: o.retried,
			Throughput: float64(o.n) / elapsed.Seconds(), Latency: latencyOf(o.hist), AnsweredLatency: latencyOf(o.answered),
			Histogram: bucketsOf(o.hist), Series: seriesOf(o, int(elapsed/time.Second))}
	}
	per := map[string]OpResult{}
	for name, o := range r.ops {
		per[name] = conv(o)
	}
	return conv(r.all), per
}
