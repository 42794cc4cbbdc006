package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-db/cairn/internal/lab/chaos"
)

// chaosFile is what tells the kinds of chaos results.json apart.
type chaosFile struct {
	Kind         string `json:"kind"`
	Linearizable *bool  `json:"linearizable"`
	Scenario     string `json:"scenario"`
}

// isChaos reports whether dir holds a chaos run's results (a single run,
// repeated runs or a sweep) rather than a bench run's.
func isChaos(dir string) bool {
	var f chaosFile
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || json.Unmarshal(b, &f) != nil {
		return false
	}
	return f.Kind == chaos.KindRepeated || f.Kind == chaos.KindSweep || f.Linearizable != nil
}

// BuildChaos writes report.md and report.html (and the sweeps' charts)
// for chaos result directories: each single run's verdict and faults,
// each repeated scenario's pass rate with its 95 % interval and its
// metrics' medians and spreads, each sweep's table and charts.
func BuildChaos(dirs []string, out, title string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if title == "" {
		title = "Cairn chaos report"
	}
	var d doc
	d.h(1, title)
	singles := table{head: []string{"run", "verdict", "ops", "ops/s", "p99 ms", "fault", "node", "unavailable ms", "ops/s during", "p99 ms during", "peak memory"}}
	var reps []chaos.Repeated
	var sweeps []chaos.Sweep
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		var f chaosFile
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("report: %s: %w", dir, err)
		}
		switch {
		case f.Kind == chaos.KindRepeated:
			var r chaos.Repeated
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("report: %s: %w", dir, err)
			}
			reps = append(reps, r)
		case f.Kind == chaos.KindSweep:
			var s chaos.Sweep
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("report: %s: %w", dir, err)
			}
			sweeps = append(sweeps, s)
		case f.Linearizable != nil:
			var r chaos.Result
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("report: %s: %w", dir, err)
			}
			singles.rows = append(singles.rows, singleRows(filepath.Base(dir), &r)...)
		default:
			return fmt.Errorf("report: %s holds no chaos results (mixing bench and chaos directories is not supported)", dir)
		}
	}
	if len(singles.rows) > 0 {
		d.h(2, "Runs")
		d.table(singles)
	}
	if len(reps) > 0 {
		d.h(2, "Repeated runs")
		d.p("Pass rate over the runs not skipped, with its 95 % Wilson score interval; metrics as median (IQR, min–max) over the runs.")
		d.table(repeatedTable(reps))
	}
	for i, s := range sweeps {
		d.h(2, fmt.Sprintf("Sweep of %s on the %s", s.Fault, s.Target))
		d.table(repeatedTable(s.Points))
		for name, svg := range SweepCharts(s) {
			file := fmt.Sprintf("sweep%d-%s", i+1, name)
			if err := os.WriteFile(filepath.Join(out, file), []byte(svg), 0o644); err != nil {
				return err
			}
			d.img(file, name)
		}
	}
	return writeDoc(&d, out, title)
}

func singleRows(name string, r *chaos.Result) [][]string {
	verdict := "PASS"
	switch {
	case r.Skipped != "":
		verdict = "skipped: " + r.Skipped
	case !r.Passed():
		verdict = "FAIL: " + strings.Join(r.Failures(), "; ")
	}
	row := []string{name + " (" + r.Scenario + ")", verdict, fmt.Sprint(r.Ops), f1(r.Throughput), f1(r.P99Ms)}
	if len(r.Faults) == 0 {
		return [][]string{append(row, "", "", "", "", "", "")}
	}
	var rows [][]string
	for i, f := range r.Faults {
		if i > 0 {
			row = []string{"", "", "", "", ""}
		}
		rows = append(rows, append(row, strings.TrimSpace(f.Kind+" "+f.Param), fmt.Sprint(f.Node), fmt.Sprint(f.UnavailableMs),
			f1(f.ThroughputDuring), f1(f.P99DuringMs), peak(f)))
	}
	return rows
}

// peak formats a memory fault's peak charge against its limit.
func peak(f chaos.FaultResult) string {
	if f.PeakMemoryBytes <= 0 {
		return ""
	}
	s := fmt.Sprintf("%d of %d MB", f.PeakMemoryBytes>>20, f.MemoryLimitBytes>>20)
	if f.OOMKills > 0 {
		s += fmt.Sprintf(", %d OOM kills", f.OOMKills)
	}
	if f.Restarted {
		s += ", restarted"
	}
	return s
}

// repeatedMetrics are the columns of a repeated-runs table.
var repeatedMetrics = []struct{ key, head string }{
	{"throughput", "ops/s"}, {"p99_ms", "p99 ms"}, {"throughput_during", "ops/s during fault"}, {"p99_during_ms", "p99 ms during fault"},
	{"unavailable_ms", "unavailable ms"}, {"recovery_ms", "recovery ms"}, {"peak_memory_mb", "peak memory MB"},
}

func repeatedTable(reps []chaos.Repeated) table {
	t := table{head: []string{"scenario", "runs", "passed", "pass rate (95 % interval)"}}
	for _, m := range repeatedMetrics {
		t.head = append(t.head, m.head)
	}
	for _, r := range reps {
		name := r.Scenario
		if r.Setting != "" {
			name = r.Setting
		}
		row := []string{name, fmt.Sprint(r.Runs - r.Skipped), fmt.Sprint(r.Passed),
			fmt.Sprintf("%.0f %% (%.0f–%.0f %%)", 100*r.PassRate, 100*r.PassRateCI95[0], 100*r.PassRateCI95[1])}
		for _, m := range repeatedMetrics {
			st, ok := r.Metrics[m.key]
			switch {
			case !ok:
				row = append(row, "")
			case st.N == 1:
				row = append(row, f1(st.Median))
			default:
				row = append(row, fmt.Sprintf("%s (%s–%s, %s–%s)", f1(st.Median), f1(st.Q1), f1(st.Q3), f1(st.Min), f1(st.Max)))
			}
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// SweepCharts draws a sweep's median throughput and p99 latency while
// the fault lasted against its setting: sweep-throughput.svg and
// sweep-p99.svg.
func SweepCharts(s chaos.Sweep) map[string]string {
	unit := "cores"
	if s.Fault == "memory" {
		unit = "MB"
	}
	thr := Series{Name: "ops/s (median)"}
	p99 := Series{Name: "p99 ms (median)"}
	for _, p := range s.Points {
		if st, ok := p.Metrics["throughput_during"]; ok {
			thr.X, thr.Y = append(thr.X, p.Value), append(thr.Y, st.Median)
		}
		if st, ok := p.Metrics["p99_during_ms"]; ok {
			p99.X, p99.Y = append(p99.X, p.Value), append(p99.Y, st.Median)
		}
	}
	x := fmt.Sprintf("%s limit on the %s (%s)", s.Fault, s.Target, unit)
	return map[string]string{
		"sweep-throughput.svg": LineChart(fmt.Sprintf("throughput while the %s limit holds", s.Fault), x, "ops/s", []Series{thr}),
		"sweep-p99.svg":        LineChart(fmt.Sprintf("p99 latency while the %s limit holds", s.Fault), x, "ms", []Series{p99}),
	}
}
