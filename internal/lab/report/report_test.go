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
