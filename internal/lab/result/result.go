package result

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Result is what results.json holds.
type Result struct {
	Label          string              `json:"label"`
	Workload       string              `json:"workload"`
	Target         string              `json:"target"`
	TargetKind     string              `json:"target_kind"`
	Ops            uint64              `json:"ops"`
	Errors         uint64              `json:"errors"`
	ErrorKinds     map[string]uint64   `json:"error_kinds"`
	Refused        uint64              `json:"refused"`
	Throughput     float64             `json:"throughput"`
	LatencyMs      Latency             `json:"latency_ms"`
	Clients        int                 `json:"clients"`
	Conns          int                 `json:"conns"`
	ElapsedSeconds float64             `json:"elapsed_seconds"`
	Preloaded      uint64              `json:"preloaded"`
	Params         map[string]any      `json:"params"`
	Approximations []string            `json:"approximations,omitempty"`
	Machine        Machine             `json:"machine"`
	StartedAt      time.Time           `json:"started_at"`
	Operations     map[string]OpResult `json:"operations"`
	Series         []Point             `json:"series"`
	Sweep          []SweepPoint        `json:"sweep,omitempty"`
}

// SweepPoint is one concurrency level of a sweep.
type SweepPoint struct {
	Clients    int     `json:"clients"`
	Conns      int     `json:"conns"`
	Ops        uint64  `json:"ops"`
	Errors     uint64  `json:"errors"`
	Throughput float64 `json:"throughput"`
	LatencyMs  Latency `json:"latency_ms"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memory_bytes"`
	GoVersion   string `json:"go_version"`
	OS          string `json:"os"`
	Kernel      string `json:"kernel,omitempty"`
	Hostname    string `json:"hostname,omitempty"`
	CairnCommit string `json:"cairn_commit"`
}

// ThisMachine reads the facts of the local machine.
func ThisMachine(commit string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, CairnCommit: commit}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				m.MemoryBytes = kb * 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// RunResult is the outcome of one run.
type RunResult struct {
	Clients    int                 `json:"clients"`
	Conns      int                 `json:"conns"`
	Rate       float64             `json:"rate,omitempty"`
	Elapsed    float64             `json:"elapsed_seconds"`
	All        OpResult            `json:"all"`
	Operations map[string]OpResult `json:"operations"`
}

// Fill copies a run's figures into the result's top level.
func (r *Result) Fill(run RunResult) {
	r.Ops, r.Errors, r.ErrorKinds, r.Refused = run.All.Ops, run.All.Errors, run.All.ErrorKinds, run.All.Refused
	r.Throughput, r.LatencyMs = run.All.Throughput, run.All.Latency
	r.Clients, r.Conns, r.ElapsedSeconds = run.Clients, run.Conns, run.Elapsed
	r.Operations, r.Series = run.Operations, run.All.Series
}

// Write stores results.json and one CSV per operation in dir.
func (r *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	for name, op := range r.Operations {
		if err := writeCSV(filepath.Join(dir, name+".csv"), op.Series); err != nil {
			return err
		}
	}
	if len(r.Sweep) > 0 {
		f, err := os.Create(filepath.Join(dir, "sweep.csv"))
		if err != nil {
			return err
		}
		w := csv.NewWriter(f)
		_ = w.Write([]string{"clients", "conns", "ops", "errors", "throughput", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"})
		for _, p := range r.Sweep {
			l := p.LatencyMs
			_ = w.Write([]string{strconv.Itoa(p.Clients), strconv.Itoa(p.Conns), fmt.Sprint(p.Ops), fmt.Sprint(p.Errors),
				ff(p.Throughput), ff(l.Mean), ff(l.P50), ff(l.P90), ff(l.P99), ff(l.P999), ff(l.Max)})
		}
		w.Flush()
		if err := w.Error(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// CSVHeader is basho_bench's summary columns; latencies in microseconds.
var CSVHeader = []string{"elapsed", "window", "n", "min", "mean", "median", "95th", "99th", "99_9th", "max", "errors"}

func writeCSV(path string, series []Point) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(CSVHeader)
	us := func(ms float64) string { return strconv.FormatInt(int64(ms*1000), 10) }
	for _, p := range series {
		_ = w.Write([]string{strconv.Itoa(p.Second), "1", fmt.Sprint(p.Ops), us(p.Min), us(p.Mean), us(p.P50),
			us(p.P95), us(p.P99), us(p.P999), us(p.Max), fmt.Sprint(p.Errors)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadResult loads dir/results.json.
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", dir, err)
	}
	return &r, nil
}

// PrintSummary writes a wrk-style latency distribution, YCSB-style
// per-operation lines and errors by kind.
func (r *Result) PrintSummary(w io.Writer) {
	fmt.Fprintf(w, "\n%s against %s (%s): %d clients over %d connections, %.1fs\n", r.Workload, r.Target, r.TargetKind, r.Clients, r.Conns, r.ElapsedSeconds)
	if r.Preloaded > 0 {
		fmt.Fprintf(w, "  preloaded %d records before the run\n", r.Preloaded)
	}
	l := r.LatencyMs
	fmt.Fprintf(w, "  Latency     mean %8.3f ms   max %8.3f ms\n", l.Mean, l.Max)
	fmt.Fprintf(w, "  Latency Distribution\n")
	for _, q := range []struct {
		n string
		v float64
	}{{"50%", l.P50}, {"75%", l.P75}, {"90%", l.P90}, {"99%", l.P99}, {"99.9%", l.P999}} {
		fmt.Fprintf(w, "    %6s  %9.3f ms\n", q.n, q.v)
	}
	fmt.Fprintf(w, "  %d requests, %d errors; throughput %.1f ops/s\n", r.Ops, r.Errors, r.Throughput)
	if r.Refused > 0 {
		fmt.Fprintf(w, "  %d refusals (503 with Retry-After) waited out and tried again\n", r.Refused)
	}
	names := make([]string, 0, len(r.Operations))
	for n := range r.Operations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := r.Operations[n]
		fmt.Fprintf(w, "  [%s], Operations, %d\n", strings.ToUpper(n), o.Ops)
		fmt.Fprintf(w, "  [%s], AverageLatency(us), %.0f\n", strings.ToUpper(n), o.Latency.Mean*1000)
		fmt.Fprintf(w, "  [%s], 99thPercentileLatency(us), %.0f\n", strings.ToUpper(n), o.Latency.P99*1000)
		fmt.Fprintf(w, "  [%s], Errors, %d\n", strings.ToUpper(n), o.Errors)
		if o.Refused > 0 {
			fmt.Fprintf(w, "  [%s], Refused, %d\n", strings.ToUpper(n), o.Refused)
			fmt.Fprintf(w, "  [%s], RetriedOperations, %d\n", strings.ToUpper(n), o.Retried)
			fmt.Fprintf(w, "  [%s], AnsweredAverageLatency(us), %.0f\n", strings.ToUpper(n), o.AnsweredLatency.Mean*1000)
			fmt.Fprintf(w, "  [%s], Answered99thPercentileLatency(us), %.0f\n", strings.ToUpper(n), o.AnsweredLatency.P99*1000)
		}
		if o.NotFound > 0 {
			fmt.Fprintf(w, "  [%s], NotFound, %d\n", strings.ToUpper(n), o.NotFound)
		}
	}
	if len(r.ErrorKinds) > 0 {
		fmt.Fprintf(w, "  errors by kind:")
		kinds := make([]string, 0, len(r.ErrorKinds))
		for k := range r.ErrorKinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			fmt.Fprintf(w, " %s=%d", k, r.ErrorKinds[k])
		}
		fmt.Fprintln(w)
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintf(w, "  sweep:  clients  throughput     p50 ms     p99 ms\n")
		for _, p := range r.Sweep {
			fmt.Fprintf(w, "          %7d  %10.1f  %9.3f  %9.3f\n", p.Clients, p.Throughput, p.LatencyMs.P50, p.LatencyMs.P99)
		}
	}
}
