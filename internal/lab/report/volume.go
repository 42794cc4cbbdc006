package report

import (
	"fmt"
	"sort"

	"github.com/cairn-db/cairn/internal/lab/result"
)

// The volume test's view (cairn bench --workload nhs, after the Riak
// release volume tests): for every run whose results hold updates or 2i
// queries, the three charts over time — throughput, 99th percentile
// update latency, mean 2i query time — each run a line, so runs (values
// separated or inline, soft limits on or off) sit side by side; and a
// table of each operation's throughput.

// isVolume reports whether r is a volume-test run.
func isVolume(r *result.Result) bool {
	_, upd := r.Operations["update"]
	_, q := r.Operations["index_query"]
	return upd && q
}

// volumeSection adds the table and the three charts for the volume runs
// of rs; it adds nothing when there is none.
func volumeSection(d *doc, rs []*result.Result, add func(file, alt, svg string)) {
	var vol []*result.Result
	names := map[string]bool{}
	for _, r := range rs {
		if isVolume(r) {
			vol = append(vol, r)
			for n := range r.Operations {
				names[n] = true
			}
		}
	}
	if len(vol) == 0 {
		return
	}
	ops := make([]string, 0, len(names))
	for n := range names {
		ops = append(ops, n)
	}
	sort.Strings(ops)
	d.h(2, "Volume test")
	t := table{head: []string{"run", "ops/s"}}
	for _, n := range ops {
		t.head = append(t.head, n+" ops/s")
	}
	t.head = append(t.head, "update p99 ms", "2i query mean ms", "errors")
	for _, r := range vol {
		row := []string{r.Label, f1(r.Throughput)}
		for _, n := range ops {
			row = append(row, f1(r.Operations[n].Throughput))
		}
		row = append(row, f3(r.Operations["update"].Latency.P99), f3(r.Operations["index_query"].Latency.Mean), fmt.Sprint(r.Errors))
		t.rows = append(t.rows, row)
	}
	d.table(t)
	var thr, upd, q []Series
	for _, r := range vol {
		thr = append(thr, seriesOf(r.Label, r.Series, func(p result.Point) float64 { return p.Throughput }))
		upd = append(upd, seriesOf(r.Label, r.Operations["update"].Series, func(p result.Point) float64 { return p.P99 }))
		q = append(q, seriesOf(r.Label, r.Operations["index_query"].Series, func(p result.Point) float64 { return p.Mean }))
	}
	add("volume_throughput.svg", "volume test: throughput over time", LineChart("Throughput over time", "second", "ops/s", thr))
	add("volume_update_p99.svg", "volume test: p99 update latency over time", LineChart("99th percentile update latency over time", "second", "ms", upd))
	add("volume_2i_mean.svg", "volume test: mean 2i query time over time", LineChart("Mean 2i query time over time", "second", "ms", q))
}

// seriesOf is one line of a chart over time: y of each second that had
// an operation.
func seriesOf(name string, ps []result.Point, y func(result.Point) float64) Series {
	s := Series{Name: name}
	for _, p := range ps {
		if p.Ops == 0 {
			continue
		}
		s.X, s.Y = append(s.X, float64(p.Second)), append(s.Y, y(p))
	}
	return s
}
