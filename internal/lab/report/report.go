package report

import (
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"html"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type table struct {
	head []string
	rows [][]string
}

func (t table) md() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

func (t table) html() string {
	var b strings.Builder
	b.WriteString("<table><tr>")
	for _, h := range t.head {
		b.WriteString("<th>" + html.EscapeString(h) + "</th>")
	}
	b.WriteString("</tr>\n")
	for _, r := range t.rows {
		b.WriteString("<tr>")
		for _, c := range r {
			b.WriteString("<td>" + html.EscapeString(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	return b.String()
}

// doc accumulates sections in both formats.
type doc struct{ md, html strings.Builder }

func (d *doc) h(level int, s string) {
	fmt.Fprintf(&d.md, "\n%s %s\n\n", strings.Repeat("#", level), s)
	fmt.Fprintf(&d.html, "<h%d>%s</h%d>\n", level, html.EscapeString(s), level)
}

func (d *doc) p(s string) {
	fmt.Fprintf(&d.md, "%s\n\n", s)
	fmt.Fprintf(&d.html, "<p>%s</p>\n", html.EscapeString(s))
}

func (d *doc) table(t table) {
	d.md.WriteString(t.md() + "\n")
	d.html.WriteString(t.html())
}

func (d *doc) img(file, alt string) {
	fmt.Fprintf(&d.md, "![%s](%s)\n\n", alt, file)
	fmt.Fprintf(&d.html, "<p><img src=\"%s\" alt=\"%s\"></p>\n", html.EscapeString(file), html.EscapeString(alt))
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f3(v float64) string { return fmt.Sprintf("%.3f", v) }

func pct(before, after float64) string {
	if before == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (after-before)/before*100)
}

// splitLabel reads "<system> <case>".
func splitLabel(l string) (system, cas string) {
	s, c, ok := strings.Cut(l, " ")
	if !ok {
		return l, ""
	}
	return s, c
}

// Build writes report.md, report.html and SVG charts for the result dirs.
func Build(dirs []string, out, title string) error {
	if len(dirs) == 0 {
		return fmt.Errorf("report: no result directories")
	}
	if isChaos(dirs[0]) {
		return BuildChaos(dirs, out, title)
	}
	var rs []*result.Result
	seen := map[string]int{}
	for _, d := range dirs {
		r, err := result.ReadResult(d)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if r.Label == "" {
			r.Label = filepath.Base(d)
		}
		if seen[r.Label]++; seen[r.Label] > 1 {
			r.Label = fmt.Sprintf("%s (%d)", r.Label, seen[r.Label])
		}
		rs = append(rs, r)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if title == "" {
		title = "Cairn benchmark report"
	}
	var d doc
	d.h(1, title)
	m := rs[0].Machine
	d.p(fmt.Sprintf("Machine: %d CPUs, %.1f GiB memory, %s, kernel %s, %s; Cairn %s. Generated from %d result directories by `cairn report`.",
		m.CPUs, float64(m.MemoryBytes)/(1<<30), m.OS, m.Kernel, m.GoVersion, m.CairnCommit, len(rs)))

	charts := []struct{ file, alt, svg string }{}
	add := func(file, alt, svg string) { charts = append(charts, struct{ file, alt, svg string }{file, alt, svg}) }

	// Runs.
	runs := table{head: []string{"run", "workload", "target", "clients/conns", "ops", "errors", "ops/s", "mean ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"}}
	for _, r := range rs {
		l := r.LatencyMs
		runs.rows = append(runs.rows, []string{r.Label, r.Workload, r.TargetKind, fmt.Sprintf("%d/%d", r.Clients, r.Conns),
			fmt.Sprint(r.Ops), fmt.Sprint(r.Errors), f1(r.Throughput), f3(l.Mean), f3(l.P50), f3(l.P90), f3(l.P99), f3(l.P999), f3(l.Max)})
	}
	d.h(2, "Runs")
	d.table(runs)

	// Comparison of systems on the same case.
	cases, systems, byKey := compareSets(rs)
	if len(cases) > 0 && len(systems) >= 2 {
		d.h(2, "Side by side")
		a, b := systems[0], systems[1]
		t := table{head: []string{"case", a + " ops/s", b + " ops/s", a + "/" + b, a + " p99 ms", b + " p99 ms", a + " mean ms", b + " mean ms"}}
		var thr, p99 [][]float64
		for _, c := range cases {
			ra, rb := byKey[a+"\x00"+c], byKey[b+"\x00"+c]
			row := []string{c, "–", "–", "–", "–", "–", "–", "–"}
			tv, pv := []float64{nan, nan}, []float64{nan, nan}
			if ra != nil {
				row[1], row[4], row[6] = f1(ra.Throughput), f3(ra.LatencyMs.P99), f3(ra.LatencyMs.Mean)
				tv[0], pv[0] = ra.Throughput, ra.LatencyMs.P99
			}
			if rb != nil {
				row[2], row[5], row[7] = f1(rb.Throughput), f3(rb.LatencyMs.P99), f3(rb.LatencyMs.Mean)
				tv[1], pv[1] = rb.Throughput, rb.LatencyMs.P99
			}
			if ra != nil && rb != nil && rb.Throughput > 0 {
				row[3] = fmt.Sprintf("%.2f×", ra.Throughput/rb.Throughput)
			}
			t.rows = append(t.rows, row)
			thr, p99 = append(thr, tv), append(p99, pv)
		}
		d.table(t)
		add("throughput_bars.svg", "throughput side by side", BarChart("Throughput (ops/s)", "ops/s", cases, []string{a, b}, thr))
		add("p99_bars.svg", "p99 side by side", BarChart("p99 latency (ms)", "ms", cases, []string{a, b}, p99))
	} else {
		var labels []string
		var thr, p99 [][]float64
		for _, r := range rs {
			labels = append(labels, r.Label)
			thr = append(thr, []float64{r.Throughput})
			p99 = append(p99, []float64{r.LatencyMs.P99})
		}
		add("throughput_bars.svg", "throughput per run", BarChart("Throughput (ops/s)", "ops/s", labels, []string{"throughput"}, thr))
		add("p99_bars.svg", "p99 per run", BarChart("p99 latency (ms)", "ms", labels, []string{"p99"}, p99))
	}

	// Sweeps.
	var curves []Series
	for _, r := range rs {
		if len(r.Sweep) == 0 {
			continue
		}
		d.h(3, "Sweep: "+r.Label)
		t := table{head: []string{"clients", "conns", "ops/s", "p50 ms", "p99 ms", "errors"}}
		s := Series{Name: r.Label}
		for _, p := range r.Sweep {
			t.rows = append(t.rows, []string{fmt.Sprint(p.Clients), fmt.Sprint(p.Conns), f1(p.Throughput), f3(p.LatencyMs.P50), f3(p.LatencyMs.P99), fmt.Sprint(p.Errors)})
			s.X, s.Y = append(s.X, p.Throughput), append(s.Y, p.LatencyMs.P99)
		}
		d.table(t)
		curves = append(curves, s)
	}
	if len(curves) > 0 {
		add("throughput_latency.svg", "throughput–latency curves", LineChart("Throughput vs p99 latency (sweep)", "throughput (ops/s)", "p99 (ms)", curves))
	}

	// Time series.
	var thrT, p99T []Series
	for _, r := range rs {
		a, b := Series{Name: r.Label}, Series{Name: r.Label}
		for _, p := range r.Series {
			a.X, a.Y = append(a.X, float64(p.Second)), append(a.Y, p.Throughput)
			b.X, b.Y = append(b.X, float64(p.Second)), append(b.Y, p.P99)
		}
		thrT, p99T = append(thrT, a), append(p99T, b)
	}
	add("throughput_over_time.svg", "throughput over time", LineChart("Throughput over time", "second", "ops/s", thrT))
	add("p99_over_time.svg", "p99 over time", LineChart("p99 latency over time", "second", "p99 (ms)", p99T))
	volumeSection(&d, rs, add)

	// Before/after against the first directory.
	if len(rs) > 1 {
		d.h(2, "Before / after (against "+rs[0].Label+")")
		base := rs[0]
		t := table{head: []string{"run", "workload", "ops/s", "Δ ops/s", "p50 ms", "Δ p50", "p99 ms", "Δ p99"}}
		for _, r := range rs[1:] {
			t.rows = append(t.rows, []string{r.Label, r.Workload, f1(r.Throughput), pct(base.Throughput, r.Throughput),
				f3(r.LatencyMs.P50), pct(base.LatencyMs.P50, r.LatencyMs.P50), f3(r.LatencyMs.P99), pct(base.LatencyMs.P99, r.LatencyMs.P99)})
		}
		d.table(t)
	}

	d.h(2, "Charts")
	for _, c := range charts {
		if err := os.WriteFile(filepath.Join(out, c.file), []byte(c.svg), 0o644); err != nil {
			return err
		}
		d.img(c.file, c.alt)
	}

	// Errors and approximations.
	var notes []string
	for _, r := range rs {
		if len(r.ErrorKinds) > 0 {
			var ks []string
			for k, v := range r.ErrorKinds {
				ks = append(ks, fmt.Sprintf("%s=%d", k, v))
			}
			sort.Strings(ks)
			notes = append(notes, fmt.Sprintf("%s: errors %s", r.Label, strings.Join(ks, ", ")))
		}
		for _, a := range r.Approximations {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Label, a))
		}
	}
	if len(notes) > 0 {
		d.h(2, "Notes")
		for _, n := range notes {
			d.p("- " + n)
		}
	}
	return writeDoc(&d, out, title)
}

// writeDoc writes d as out/report.md and out/report.html.
func writeDoc(d *doc, out, title string) error {
	md := d.md.String()
	page := "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) +
		"</title><style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\n" +
		d.html.String() + "</body></html>\n"
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "report.html"), []byte(page), 0o644)
}

var nan = math.NaN()

// compareSets finds cases run by several systems, in first-seen order.
func compareSets(rs []*result.Result) (cases, systems []string, byKey map[string]*result.Result) {
	byKey = map[string]*result.Result{}
	count := map[string]int{}
	seenSys := map[string]bool{}
	var allCases []string
	for _, r := range rs {
		s, c := splitLabel(r.Label)
		if c == "" {
			continue
		}
		if !seenSys[s] {
			seenSys[s] = true
			systems = append(systems, s)
		}
		if _, ok := count[c]; !ok {
			allCases = append(allCases, c)
		}
		count[c]++
		byKey[s+"\x00"+c] = r
	}
	cases = allCases
	if len(systems) < 2 {
		return nil, systems, byKey
	}
	return cases, systems, byKey
}
