package chaos

import (
	"github.com/cairn-db/cairn/internal/lab/result"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	good := map[string]struct {
		kind, param string
		cgroups     bool
	}{
		"kill":            {"kill", "", false},
		"pause":           {"pause", "", false},
		"restart":         {"restart", "", false},
		"partition":       {"partition", "isolate", false},
		"split":           {"partition", "split", false},
		"disk-stall=1s":   {"disk-stall", "1s", false},
		"cpu=0.1":         {"slow-cpu", "0.10 core", true},
		"memory=256":      {"memory", "256 MB", true},
		"memory=128MB":    {"memory", "128 MB", true},
		"disk-stall=fast": {"", "", false}, // not a duration
		"clock-skew=2m":   {"clock-skew", "2m0s", false},
		"disk-full":       {"disk-full", "", false},
		"clock-skew=-90s": {"clock-skew", "-1m30s", false},
		"clock-jump=1h":   {"clock-jump", "1h0m0s", false},
	}
	for spec, want := range good {
		f, cg, err := ParseFault(spec)
		if want.kind == "" {
			if err == nil {
				t.Errorf("%q accepted", spec)
			}
			continue
		}
		if err != nil || f.Kind() != want.kind || f.Param() != want.param || cg != want.cgroups {
			t.Errorf("%q: %v %v %v, want %+v", spec, f, cg, err, want)
		}
	}
	for _, bad := range []string{"", "kill=1", "cpu", "cpu=0", "cpu=-1", "memory=8", "memory=x", "disk-stall=0s", "flood", "split=2", "clock-skew", "clock-skew=0s", "clock-jump=25h", "clock-jump=x", "disk-full=1"} {
		if _, _, err := ParseFault(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestScheduleSteps(t *testing.T) {
	s := Schedule{At: 5 * time.Second, For: 2 * time.Second, Every: 6 * time.Second, Repeat: 3}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	steps := s.Steps(killFault{}, "random")
	if len(steps) != 3 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, st := range steps {
		if st.At != 5*time.Second+time.Duration(i)*6*time.Second || st.For != 2*time.Second || st.Target != "random" {
			t.Fatalf("step %d: %+v", i, st)
		}
	}
	if s.End() != 19*time.Second {
		t.Fatalf("end %v", s.End())
	}
	for _, bad := range []Schedule{
		{At: 0, For: time.Second, Repeat: 1},
		{At: time.Second, For: 0, Repeat: 1},
		{At: time.Second, For: time.Second, Repeat: 0},
		{At: time.Second, For: 5 * time.Second, Every: 5 * time.Second, Repeat: 2}, // overlapping faults
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestValidTarget(t *testing.T) {
	for _, ok := range []string{"leader", "follower", "leader:3", "follower:16", "node:2", "random"} {
		if err := ValidTarget(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "leader:0", "leader:x", "node", "node:0", "node:-1", "random:1", "primary"} {
		if ValidTarget(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPassedNeedsEveryFaultInjected(t *testing.T) {
	r := Result{Linearizable: true, ReplicasConverged: true, Faults: []FaultResult{{Kind: "kill"}}}
	if !r.Passed() {
		t.Fatal("a clean run failed")
	}
	r.Faults = append(r.Faults, FaultResult{Kind: "memory", Error: "cannot write memory.max"})
	if r.Passed() {
		t.Fatal("a run whose fault was never injected passed")
	}
	r = Result{Skipped: "no cgroups"}
	if !r.Passed() {
		t.Fatal("a skipped run failed")
	}
	for _, broken := range []Result{{Linearizable: false, ReplicasConverged: true}, {Linearizable: true, ReplicasConverged: true, LostWrites: 1}, {Linearizable: true}} {
		if broken.Passed() {
			t.Fatalf("%+v passed", broken)
		}
	}
}

func TestHalfBaseline(t *testing.T) {
	pts := func(tp ...float64) []result.Point {
		out := make([]result.Point, len(tp))
		for i, v := range tp {
			out[i] = result.Point{Second: i + 1, Throughput: v}
		}
		return out
	}
	// Fault from 2.0 s to 8.0 s: seconds 3..8 are inside.
	cases := []struct {
		tp   []float64
		want int64
	}{
		{[]float64{100, 100, 100, 100, 100, 100, 100, 100, 100}, 1000}, // never dipped
		{[]float64{100, 100, 10, 20, 60, 70, 80, 90, 100}, 3000},       // back at second 5
		{[]float64{100, 100, 10, 60, 20, 60, 80, 90, 100}, 4000},       // dipped again: counts from the last rise
		{[]float64{100, 100, 10, 10, 10, 10, 10, 40, 100}, -1},         // ends below half
		{[]float64{100, 100, 50, 50, 50, 50, 50, 50, 10}, 1000},        // exactly half is enough; after healing ignored
	}
	for i, c := range cases {
		if got := halfBaseline(pts(c.tp...), 2000, 8000, 100); got != c.want {
			t.Errorf("case %d: %d, want %d", i, got, c.want)
		}
	}
}

// A run whose acknowledged writes could not all be read back after
// healing fails, with the reason, even with every other check passing.
func TestReadBackErrorFails(t *testing.T) {
	r := Result{Linearizable: true, ReplicasConverged: true, ReadBackError: "reading k: timeout"}
	if r.Passed() {
		t.Fatal("a run whose writes could not be read back passed")
	}
	if f := r.Failures(); len(f) != 1 || !strings.Contains(f[0], "reading k: timeout") {
		t.Fatalf("failures %q, want the read-back error", f)
	}
}
