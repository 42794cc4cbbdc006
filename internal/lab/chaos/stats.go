package chaos

import (
	"math"
	"sort"

	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/result"
)

// Wilson is the 95 % Wilson score interval of a pass rate of k passes in
// n runs: unlike k/n ± 1.96·σ it stays inside [0, 1] and is not empty at
// 0 or n passes (10 passes of 10 runs: 0.72–1). n = 0: 0–1.
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959963984540054 // the 97.5th percentile of the normal law
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

// Stat is one metric over repeated runs: its median and spread.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Q1 and Q3 are the first and third quartiles (the IQR is Q3-Q1).
	Q1 float64 `json:"q1"`
	Q3 float64 `json:"q3"`
}

// Summarize computes a Stat; quantiles interpolate linearly between the
// sorted values (type 7, as R's and NumPy's default).
func Summarize(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return Stat{N: len(s), Median: quantile(s, 0.5), Min: s[0], Max: s[len(s)-1], Q1: quantile(s, 0.25), Q3: quantile(s, 0.75)}
}

// quantile of sorted s at q in [0, 1].
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// p99Between is the 99th percentile latency in ms of the operations
// invoked from fromNs to toNs (0: none).
func p99Between(history []checker.Op, fromNs, toNs int64) float64 {
	var lat []float64
	for _, op := range history {
		if op.Call >= fromNs && op.Call <= toNs {
			lat = append(lat, float64(op.Return-op.Call)/1e6)
		}
	}
	if len(lat) == 0 {
		return 0
	}
	sort.Float64s(lat)
	return lat[int(math.Ceil(0.99*float64(len(lat))))-1]
}

// meanThroughput is the mean ops/s of the series' seconds that end after
// fromMs and by toMs (0: none).
func meanThroughput(series []result.Point, fromMs, toMs int64) float64 {
	var sum float64
	n := 0
	for _, p := range series {
		if ms := int64(p.Second) * 1000; ms > fromMs && ms <= toMs {
			sum += p.Throughput
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
