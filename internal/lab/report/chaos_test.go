package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/lab/chaos"
)

func TestChaosReport(t *testing.T) {
	root := t.TempDir()
	single := &chaos.Result{Scenario: "memory-leader", Ops: 1000, Throughput: 50, Linearizable: true, ReplicasConverged: true,
		Faults: []chaos.FaultResult{{Kind: "memory", Param: "128 MB", Node: 2, PeakMemoryBytes: 127 << 20, MemoryLimitBytes: 128 << 20, OOMKills: 1, Restarted: true}}}
	dirs := []string{filepath.Join(root, "one"), filepath.Join(root, "rep"), filepath.Join(root, "sweep")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := single.Write(dirs[0]); err != nil {
		t.Fatal(err)
	}
	runs := []chaos.RunSummary{{Passed: true, Throughput: 100}, {Passed: true, Throughput: 120}, {Passed: false, Throughput: 80}}
	if err := chaos.WriteJSON(dirs[1], chaos.SummarizeRuns("leader-kill", runs)); err != nil {
		t.Fatal(err)
	}
	p1 := chaos.SummarizeRuns("sweep cpu=0.1", []chaos.RunSummary{{Passed: true, ThroughputDuring: 900, P99DuringMs: 3}})
	p1.Setting, p1.Value = "cpu=0.1", 0.1
	p2 := chaos.SummarizeRuns("sweep cpu=0.05", []chaos.RunSummary{{Passed: true, ThroughputDuring: 400, P99DuringMs: 9}})
	p2.Setting, p2.Value = "cpu=0.05", 0.05
	if err := chaos.WriteJSON(dirs[2], chaos.Sweep{Kind: chaos.KindSweep, Fault: "cpu", Target: "leader", Points: []chaos.Repeated{p1, p2}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "report")
	if err := Build(dirs, out, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"memory-leader", "127 of 128 MB, 1 OOM kills, restarted", "leader-kill", "67 % (21–94 %)",
		"100.0 (90.0–110.0, 80.0–120.0)", "cpu=0.05", "sweep1-sweep-throughput.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if svg, err := os.ReadFile(filepath.Join(out, "sweep1-sweep-p99.svg")); err != nil || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("sweep chart: %v", err)
	}
}
