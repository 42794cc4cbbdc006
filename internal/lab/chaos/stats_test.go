package chaos

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 5e-4 }

func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{10, 10, 0.7225, 1},     // all passed: the interval still admits failures
		{0, 10, 0, 0.2775},      // none passed
		{5, 10, 0.2366, 0.7634}, // symmetric around a half
		{8, 10, 0.4902, 0.9433}, // a flaky setting
		{95, 100, 0.8882, 0.9785},
	} {
		lo, hi := Wilson(c.k, c.n)
		if !near(lo, c.lo) || !near(hi, c.hi) {
			t.Errorf("Wilson(%d, %d) = %.4f–%.4f, want %.4f–%.4f", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := Wilson(0, 0); lo != 0 || hi != 1 {
		t.Errorf("no runs: %v–%v", lo, hi)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{7, 1, 3, 5, 9})
	if s.N != 5 || s.Median != 5 || s.Min != 1 || s.Max != 9 || s.Q1 != 3 || s.Q3 != 7 {
		t.Fatalf("%+v", s)
	}
	s = Summarize([]float64{4, 1, 2, 3})
	if s.Median != 2.5 || s.Q1 != 1.75 || s.Q3 != 3.25 {
		t.Fatalf("even count: %+v", s)
	}
	if s := Summarize([]float64{42}); s.Median != 42 || s.Q1 != 42 || s.Q3 != 42 {
		t.Fatalf("one value: %+v", s)
	}
	if s := Summarize(nil); s.N != 0 {
		t.Fatalf("none: %+v", s)
	}
}

func TestParseSweep(t *testing.T) {
	kind, vs, err := ParseSweep("cpu=0.1:0.05:0.01")
	if err != nil || kind != "cpu" || len(vs) != 6 || vs[0] != 0.1 || vs[3] != 0.07 || vs[5] != 0.05 {
		t.Fatalf("cpu: %s %v %v", kind, vs, err)
	}
	kind, vs, err = ParseSweep("memory=512:224:32")
	if err != nil || kind != "memory" || len(vs) != 10 || vs[0] != 512 || vs[9] != 224 {
		t.Fatalf("memory: %s %v %v", kind, vs, err)
	}
	_, vs, _ = ParseSweep("cpu=0.1:0.05:0.01")
	for i, want := range []string{"cpu=0.1", "cpu=0.09", "cpu=0.08", "cpu=0.07", "cpu=0.06", "cpu=0.05"} {
		if got := SweepFault("cpu", vs[i]); got != want {
			t.Errorf("step %d: %s, want %s", i, got, want)
		}
	}
	if _, vs, _ := ParseSweep("memory=128:256:64"); len(vs) != 3 || vs[2] != 256 {
		t.Fatalf("upward: %v", vs)
	}
	if SweepFault("memory", 480) != "memory=480" || SweepFault("cpu", 0.07) != "cpu=0.07" {
		t.Fatalf("specs %q %q", SweepFault("memory", 480), SweepFault("cpu", 0.07))
	}
	for _, bad := range []string{"", "cpu", "cpu=0.1:0.05", "disk=1:2:1", "cpu=0.1:0.05:0", "cpu=a:b:c", "memory=1:100000:1"} {
		if _, _, err := ParseSweep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSummarizeRuns(t *testing.T) {
	runs := []RunSummary{
		{Passed: true, Ops: 100, Throughput: 10, RecoveryMs: 500, HalfBaselineMs: 100},
		{Passed: false, Ops: 300, Throughput: 30, RecoveryMs: -1, HalfBaselineMs: 300},
		{Passed: true, Ops: 200, Throughput: 20, RecoveryMs: 700, HalfBaselineMs: -1},
		{Skipped: "no cgroups"},
	}
	r := SummarizeRuns("x", runs)
	if r.Runs != 4 || r.Skipped != 1 || r.Passed != 2 || !near(r.PassRate, 2.0/3) {
		t.Fatalf("%+v", r)
	}
	if lo, hi := Wilson(2, 3); r.PassRateCI95 != [2]float64{lo, hi} {
		t.Fatalf("interval %v", r.PassRateCI95)
	}
	if m := r.Metrics["ops"]; m.N != 3 || m.Median != 200 || m.Min != 100 || m.Max != 300 {
		t.Fatalf("ops %+v", m)
	}
	if m := r.Metrics["recovery_ms"]; m.N != 2 || m.Median != 600 {
		t.Fatalf("recovery over the runs that recovered: %+v", m)
	}
	if _, ok := r.Metrics["peak_memory_mb"]; ok {
		t.Fatal("peak memory without a memory fault")
	}
}

func TestRunSummaryTakesTheWorstFault(t *testing.T) {
	r := &Result{Linearizable: true, ReplicasConverged: true, Faults: []FaultResult{
		{Kind: "memory", UnavailableMs: 100, RecoveryMs: 200, HalfBaselineMs: 50, ThroughputDuring: 900, P99DuringMs: 5, PeakMemoryBytes: 100 << 20},
		{Kind: "memory", UnavailableMs: 300, RecoveryMs: -1, HalfBaselineMs: 20, ThroughputDuring: 400, P99DuringMs: 9, PeakMemoryBytes: 120 << 20, ClientErrors: 2},
	}}
	s := r.Summarize("d")
	if !s.Passed || s.UnavailableMs != 300 || s.RecoveryMs != -1 || s.HalfBaselineMs != 50 || s.ThroughputDuring != 400 ||
		s.P99DuringMs != 9 || s.PeakMemoryMB != 120 || s.ClientErrors != 2 {
		t.Fatalf("%+v", s)
	}
	r.Faults = append(r.Faults, FaultResult{Kind: "disk-full"})
	if r.Passed() || len(r.Failures()) != 1 {
		t.Fatalf("disk-full without other writes passed: %v", r.Failures())
	}
}
