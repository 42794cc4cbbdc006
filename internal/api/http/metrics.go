package httpapi

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight prometheus.Gauge
	// series caches the counter and histogram of each route, method and
	// code (a bounded set), saving the vectors' label hashing and lookup
	// on every request.
	series sync.Map // seriesKey -> *series
}

type seriesKey struct {
	route, method string
	code          int
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cairn_http_request_duration_seconds", Help: "HTTP request latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"route", "method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cairn_http_inflight", Help: "Data requests in flight.",
		}),
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.inflight = register(reg, m.inflight)
	return m
}

// register registers c, reusing an identical collector already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) observe(route, method string, code int, d time.Duration) {
	if code == 0 {
		code = 200
	}
	switch method {
	case "GET", "HEAD", "PUT", "POST", "DELETE":
	default:
		method = "OTHER" // bounded label values whatever clients send
	}
	k := seriesKey{route, method, code}
	v, ok := m.series.Load(k)
	if !ok {
		v, _ = m.series.LoadOrStore(k, &series{
			requests: m.requests.WithLabelValues(route, method, strconv.Itoa(code)),
			duration: m.duration.WithLabelValues(route, method),
		})
	}
	sr := v.(*series)
	sr.requests.Inc()
	sr.duration.Observe(d.Seconds())
}
