package report

import (
	"github.com/cairn-db/cairn/internal/lab/result"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeResult(t *testing.T, label, workload string, thr, p99 float64, sweep bool) string {
	t.Helper()
	r := &result.Result{Label: label, Workload: workload, TargetKind: strings.Fields(label)[0], Ops: uint64(thr * 10),
		Throughput: thr, LatencyMs: result.Latency{P50: p99 / 2, P99: p99, Mean: p99 / 2},
		Machine: result.Machine{CPUs: 2, MemoryBytes: 1 << 30, GoVersion: "go", CairnCommit: "abc"}}
	for s := 1; s <= 5; s++ {
		r.Series = append(r.Series, result.Point{Second: s, Throughput: thr, P99: p99})
	}
	if sweep {
		for _, c := range []int{1, 2, 4} {
			r.Sweep = append(r.Sweep, result.SweepPoint{Clients: c, Conns: c, Throughput: thr * float64(c) / 4, LatencyMs: result.Latency{P99: p99 * float64(c)}})
		}
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuildSideBySide(t *testing.T) {
	dirs := []string{
		writeResult(t, "cairn put-1", "put", 3000, 2, false),
		writeResult(t, "etcd put-1", "put", 1000, 4, false),
		writeResult(t, "cairn ycsb-a", "ycsb-a", 500, 8, true),
		writeResult(t, "etcd ycsb-a", "ycsb-a", 250, 9, true),
	}
	out := t.TempDir()
	if err := Build(dirs, out, "test report"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# test report", "| put-1 | 3000.0 | 1000.0 | 3.00× |", "| ycsb-a | 500.0 | 250.0 | 2.00× |",
		"Sweep: cairn ycsb-a", "throughput_latency.svg", "Before / after", "| etcd put-1 | put | 1000.0 | -66.7% |"} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, f := range []string{"report.html", "throughput_bars.svg", "p99_bars.svg", "throughput_over_time.svg", "p99_over_time.svg", "throughput_latency.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) < 100 {
			t.Fatalf("%s: %v (%d bytes)", f, err, len(b))
		}
		if strings.HasSuffix(f, ".svg") && (!strings.HasPrefix(string(b), "<svg") || strings.Contains(string(b), "NaN")) {
			t.Fatalf("%s is not a clean SVG", f)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	if err := Build(nil, t.TempDir(), ""); err == nil {
		t.Fatal("no dirs accepted")
	}
	if err := Build([]string{t.TempDir()}, t.TempDir(), ""); err == nil {
		t.Fatal("dir without results.json accepted")
	}
}

// Volume-test runs (values separated, inline) get a table of every
// operation's throughput and three charts over time, one line per run.
func TestBuildVolumeCharts(t *testing.T) {
	var dirs []string
	for i, label := range []string{"cairn separated", "cairn inline"} {
		r := &result.Result{Label: label, Workload: "nhs", TargetKind: "cairn", Throughput: 100, Machine: result.Machine{CPUs: 2}}
		r.Operations = map[string]result.OpResult{}
		for _, n := range []string{"get", "head_get", "update", "insert", "index_query"} {
			o := result.OpResult{Throughput: float64(10 * (i + 1)), Latency: result.Latency{P99: 7, Mean: 3}}
			for s := 1; s <= 4; s++ {
				o.Series = append(o.Series, result.Point{Second: s, Ops: 10, Throughput: 10, P99: float64(20 + s), Mean: float64(5 + i)})
			}
			r.Operations[n] = o
		}
		for s := 1; s <= 4; s++ {
			r.Series = append(r.Series, result.Point{Second: s, Ops: 50, Throughput: 50})
		}
		dir := t.TempDir()
		if err := r.Write(dir); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	out := t.TempDir()
	if err := Build(dirs, out, "volume"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Volume test", "| run | ops/s | get ops/s | head_get ops/s | index_query ops/s | insert ops/s | update ops/s | update p99 ms | 2i query mean ms | errors |",
		"| cairn inline | 100.0 | 20.0 | 20.0 | 20.0 | 20.0 | 20.0 | 7.000 | 3.000 | 0 |", "volume_update_p99.svg"} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, f := range []string{"volume_throughput.svg", "volume_update_p99.svg", "volume_2i_mean.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !strings.HasPrefix(string(b), "<svg") || strings.Contains(string(b), "NaN") {
			t.Fatalf("%s: %v", f, err)
		}
		for _, run := range []string{"cairn separated", "cairn inline"} {
			if !strings.Contains(string(b), run) {
				t.Fatalf("%s has no line for %s", f, run)
			}
		}
	}
}
