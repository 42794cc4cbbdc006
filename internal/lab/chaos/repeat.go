package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Kinds of results.json beyond a single run's (which has none).
const (
	KindRepeated = "chaos-repeated"
	KindSweep    = "chaos-sweep"
)

// RunSummary is one run of a repeated scenario: its verdict and the
// metrics the summary aggregates (the worst fault's, where a run has
// several).
type RunSummary struct {
	Dir        string  `json:"dir"`
	Passed     bool    `json:"passed"`
	Skipped    string  `json:"skipped,omitempty"`
	Ops        int     `json:"ops"`
	Throughput float64 `json:"throughput"`
	P99Ms      float64 `json:"p99_ms"`
	// Of the faults: the longest unavailability, recovery and time to
	// half the baseline (-1: never), the client errors in all, the lowest
	// throughput and the highest p99 while a fault lasted.
	UnavailableMs    int64   `json:"unavailable_ms"`
	RecoveryMs       int64   `json:"recovery_ms"`
	HalfBaselineMs   int64   `json:"half_baseline_ms"`
	ClientErrors     int     `json:"client_errors"`
	ThroughputDuring float64 `json:"throughput_during"`
	P99DuringMs      float64 `json:"p99_during_ms"`
	// PeakMemoryMB is the highest cgroup memory charge a fault's node
	// reached (0: no memory fault).
	PeakMemoryMB float64  `json:"peak_memory_mb,omitempty"`
	Failed       []string `json:"failed,omitempty"`
}

// Repeated is results.json of a scenario run several times on fresh
// clusters: its pass rate with a 95 % Wilson interval, and each metric's
// median and spread over the runs that were not skipped.
type Repeated struct {
	Kind     string `json:"kind"`
	Scenario string `json:"scenario"`
	// Setting and Value name a sweep's step ("cpu=0.05", 0.05); empty
	// otherwise.
	Setting      string          `json:"setting,omitempty"`
	Value        float64         `json:"value,omitempty"`
	Runs         int             `json:"runs"`
	Skipped      int             `json:"skipped"`
	Passed       int             `json:"passed"`
	PassRate     float64         `json:"pass_rate"`
	PassRateCI95 [2]float64      `json:"pass_rate_ci95"`
	Metrics      map[string]Stat `json:"metrics"`
	RunResults   []RunSummary    `json:"run_results"`
}

// Sweep is results.json of a sweep: one Repeated per setting.
type Sweep struct {
	Kind     string     `json:"kind"`
	Scenario string     `json:"scenario"`
	Fault    string     `json:"fault"`
	Target   string     `json:"target"`
	Points   []Repeated `json:"points"`
}

// Summarize one run.
func (r *Result) Summarize(dir string) RunSummary {
	s := RunSummary{Dir: dir, Passed: r.Passed(), Skipped: r.Skipped, Ops: r.Ops, Throughput: r.Throughput, P99Ms: r.P99Ms,
		RecoveryMs: 0, HalfBaselineMs: 0, Failed: r.Failures()}
	for i, f := range r.Faults {
		s.UnavailableMs = max(s.UnavailableMs, f.UnavailableMs)
		s.ClientErrors += f.ClientErrors
		s.P99DuringMs = max(s.P99DuringMs, f.P99DuringMs)
		if i == 0 || f.ThroughputDuring < s.ThroughputDuring {
			s.ThroughputDuring = f.ThroughputDuring
		}
		if f.RecoveryMs < 0 || s.RecoveryMs < 0 {
			s.RecoveryMs = -1
		} else {
			s.RecoveryMs = max(s.RecoveryMs, f.RecoveryMs)
		}
		if f.HalfBaselineMs < 0 || s.HalfBaselineMs < 0 {
			s.HalfBaselineMs = -1
		} else {
			s.HalfBaselineMs = max(s.HalfBaselineMs, f.HalfBaselineMs)
		}
		if f.PeakMemoryBytes > 0 {
			s.PeakMemoryMB = max(s.PeakMemoryMB, float64(f.PeakMemoryBytes)/(1<<20))
		}
	}
	return s
}

// Failures lists the checks the run failed (none when it passed).
func (r *Result) Failures() []string {
	var out []string
	if r.Skipped != "" {
		return nil
	}
	if !r.Linearizable {
		out = append(out, "not linearizable")
	}
	if r.LostWrites > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged writes lost", r.LostWrites))
	}
	if r.ReadBackError != "" {
		out = append(out, "the healed cluster did not answer a read of an acknowledged write: "+r.ReadBackError)
	}
	if len(r.AppliedTwice) > 0 {
		out = append(out, fmt.Sprintf("%d writes applied twice", len(r.AppliedTwice)))
	}
	if !r.ReplicasConverged {
		out = append(out, "replicas diverged")
	}
	if r.Index != nil && r.Index.Failed() {
		out = append(out, fmt.Sprintf("index queries: %d required objects missing, %d unexpected %s", len(r.Index.Missing), len(r.Index.Unexpected), r.Index.Error))
	}
	if x := r.Leases; x != nil && x.Failed() {
		out = append(out, fmt.Sprintf("leases: %d violations, %d keys of ended leases left %s", len(x.Violations), len(x.KeysLeft), x.Error))
	}
	for _, b := range r.Backups {
		if b.Error != "" || b.Missing > 0 {
			out = append(out, fmt.Sprintf("backup %s: %d of %d writes acknowledged before it missing after restore %s", filepath.Base(b.Dir), b.Missing, b.AckedBefore, b.Error))
		}
	}
	if r.Elastic != nil {
		var errs uint64
		for _, n := range r.ClientErrors {
			errs += n
		}
		out = append(out, r.Elastic.Failures(errs)...)
	}
	for _, f := range r.Faults {
		if f.Error != "" {
			out = append(out, fmt.Sprintf("%s on node %d: %s", f.Kind, f.Node, f.Error))
		}
		if f.Kind == "disk-full" && f.OtherWritesOK == 0 {
			out = append(out, "no write succeeded through the other nodes while the disk was full")
		}
	}
	return out
}

// SummarizeRuns aggregates the runs of scenario: the pass rate and its
// interval over the runs not skipped, and each metric's Stat (recovery
// and time to half the baseline over the runs that reached them).
func SummarizeRuns(scenario string, runs []RunSummary) Repeated {
	rep := Repeated{Kind: KindRepeated, Scenario: scenario, Runs: len(runs), RunResults: runs, Metrics: map[string]Stat{}}
	vals := map[string][]float64{}
	for _, r := range runs {
		if r.Skipped != "" {
			rep.Skipped++
			continue
		}
		if r.Passed {
			rep.Passed++
		}
		add := func(name string, v float64) { vals[name] = append(vals[name], v) }
		add("ops", float64(r.Ops))
		add("throughput", r.Throughput)
		add("p99_ms", r.P99Ms)
		add("unavailable_ms", float64(r.UnavailableMs))
		add("client_errors", float64(r.ClientErrors))
		add("throughput_during", r.ThroughputDuring)
		add("p99_during_ms", r.P99DuringMs)
		if r.RecoveryMs >= 0 {
			add("recovery_ms", float64(r.RecoveryMs))
		}
		if r.HalfBaselineMs >= 0 {
			add("half_baseline_ms", float64(r.HalfBaselineMs))
		}
		if r.PeakMemoryMB > 0 {
			add("peak_memory_mb", r.PeakMemoryMB)
		}
	}
	for k, v := range vals {
		rep.Metrics[k] = Summarize(v)
	}
	n := rep.Runs - rep.Skipped
	if n > 0 {
		rep.PassRate = float64(rep.Passed) / float64(n)
	}
	rep.PassRateCI95[0], rep.PassRateCI95[1] = Wilson(rep.Passed, n)
	return rep
}

// MetricNames lists the metrics of a summary in a stable order.
func (r Repeated) MetricNames() []string {
	var out []string
	for k := range r.Metrics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseSweep reads --sweep KIND=START:END:STEP (cpu in cores, memory in
// MB): the settings from START toward END by STEP, both ends included.
func ParseSweep(spec string) (kind string, values []float64, err error) {
	kind, rng, ok := strings.Cut(spec, "=")
	parts := strings.Split(rng, ":")
	bad := func() (string, []float64, error) {
		return "", nil, fmt.Errorf("chaos: --sweep KIND=START:END:STEP with KIND cpu or memory (e.g. cpu=0.1:0.05:0.01, memory=512:224:32), got %q", spec)
	}
	if !ok || (kind != "cpu" && kind != "memory") || len(parts) != 3 {
		return bad()
	}
	var f [3]float64
	for i, p := range parts {
		if f[i], err = strconv.ParseFloat(strings.TrimSpace(p), 64); err != nil {
			return bad()
		}
	}
	start, end, step := f[0], f[1], f[2]
	if step <= 0 || start <= 0 || end <= 0 {
		return bad()
	}
	dir := 1.0
	if end < start {
		dir = -1
	}
	for i := 0; ; i++ {
		v := start + dir*float64(i)*step
		if dir*(v-end) > step*1e-9 {
			break
		}
		if i >= 100 {
			return "", nil, fmt.Errorf("chaos: --sweep %s has over 100 steps", spec)
		}
		values = append(values, roundTo(v, step))
	}
	return kind, values, nil
}

// roundTo rounds v to three decimals more than step has (0.1-0.01*3 is
// 0.07, not 0.06999999999999999), through its decimal form so the
// setting prints as typed.
func roundTo(v, step float64) float64 {
	dec := max(0, int(math.Ceil(-math.Log10(step)))+3)
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', dec, 64), 64)
	return r
}

// SweepFault is the fault spec of a sweep's setting (ParseFault's form).
func SweepFault(kind string, v float64) string {
	if kind == "memory" {
		return fmt.Sprintf("memory=%d", int64(math.Round(v)))
	}
	return "cpu=" + strconv.FormatFloat(v, 'f', -1, 64)
}

// WriteJSON stores v as dir/results.json.
func WriteJSON(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
}
