package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchResults is what the tests read of a results.json.
type benchResults struct {
	Workload   string  `json:"workload"`
	Target     string  `json:"target"`
	TargetKind string  `json:"target_kind"`
	Ops        uint64  `json:"ops"`
	Errors     uint64  `json:"errors"`
	Throughput float64 `json:"throughput"`
	Preloaded  uint64  `json:"preloaded"`
	Latency    struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	Sweep []json.RawMessage `json:"sweep"`
}

func readBenchResults(t *testing.T, dir string) benchResults {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res benchResults
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A few seconds of real load through `cairn bench`, then `cairn report`.
func TestBenchAndReportEndToEnd(t *testing.T) {
	c := newCluster(t, 3)
	target := c.url(1) + "," + c.url(2) + "," + c.url(3)
	dir := t.TempDir()
	runs := map[string][]string{
		"entity": {"--workload", "entity", "--clients", "4", "--duration", "2s", "--warmup", "500ms", "--replicas", "2/3"},
		"range":  {"--workload", "range", "--keys", "200", "--clients", "8", "--conns", "2", "--total", "1000", "--consistency", "s"},
		"put-h2": {"--workload", "put", "--clients", "16", "--conns", "2", "--total", "500", "--http", "2"},
		"ycsb":   {"--workload", "ycsb-a", "--records", "200", "--sweep", "1,4", "--duration", "1s", "--warmup", "200ms"},
	}
	var outs []string
	for name, args := range runs {
		out := filepath.Join(dir, name)
		outs = append(outs, out)
		cmd := exec.Command(binary, append([]string{"bench", "--target", target, "--out", out, "--label", "cairn " + name}, args...)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bench %s: %v\n%s", name, err, b)
		}
		if !strings.Contains(string(b), "Latency Distribution") || !strings.Contains(string(b), "99.9%") {
			t.Fatalf("bench %s printed no latency distribution:\n%s", name, b)
		}
		res := readBenchResults(t, out)
		if res.Ops == 0 || res.Throughput <= 0 || res.Latency.P99 <= 0 {
			t.Fatalf("bench %s: ops %d throughput %.1f p99 %.3f", name, res.Ops, res.Throughput, res.Latency.P99)
		}
		if res.Errors*100 > res.Ops {
			t.Fatalf("bench %s: %d errors in %d ops on a healthy cluster", name, res.Errors, res.Ops)
		}
		switch name {
		case "range":
			if res.Ops != 1000 || res.Preloaded != 200 {
				t.Fatalf("range: %d ops, %d preloaded", res.Ops, res.Preloaded)
			}
		case "put-h2":
			if res.Ops != 500 || res.Errors != 0 {
				t.Fatalf("put over HTTP/2: %d ops, %d errors", res.Ops, res.Errors)
			}
		case "ycsb":
			if len(res.Sweep) != 2 {
				t.Fatalf("ycsb sweep has %d points", len(res.Sweep))
			}
		}
		csvs, _ := filepath.Glob(filepath.Join(out, "*.csv"))
		if len(csvs) == 0 {
			t.Fatalf("bench %s wrote no CSV", name)
		}
	}
	rep := filepath.Join(dir, "report")
	b, err := exec.Command(binary, append(append([]string{"report"}, outs...), "--out", rep)...).CombinedOutput()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	for _, f := range []string{"report.md", "report.html", "throughput_over_time.svg", "throughput_latency.svg"} {
		if st, err := os.Stat(filepath.Join(rep, f)); err != nil || st.Size() == 0 {
			t.Fatalf("report file %s: %v", f, err)
		}
	}
}
