package integration

import (
	"encoding/csv"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// `cairn bench` against a real etcd (Debian's etcd-server, which `make test`
// installs when it can) through the official client: results.json and the
// per-operation CSV, and a report next to a Cairn run.
func TestBenchAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not installed (apt-get install etcd-server); make test installs it when it can")
	}
	addrs, err := launcher.FreeAddrs([]string{"127.0.0.1", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	client, peer := "http://"+addrs[0], "http://"+addrs[1]
	cmd := exec.Command(etcd, "--name", "e1", "--data-dir", t.TempDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e1="+peer, "--initial-cluster-state", "new")
	logf, err := os.Create(filepath.Join(t.TempDir(), "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	eventually(t, 30*time.Second, func() string {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return resp.Status
		}
		return ""
	})

	dir := t.TempDir()
	out := filepath.Join(dir, "etcd-put")
	b, err := exec.Command(binary, "bench", "--target", "etcd://"+addrs[0], "--workload", "put",
		"--key-size", "8", "--val-size", "256", "--clients", "8", "--conns", "2", "--total", "400",
		"--label", "etcd put", "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("bench against etcd: %v\n%s", err, b)
	}
	res := readBenchResults(t, out)
	if res.Workload != "put" || !strings.HasPrefix(res.Target, "etcd://") || res.TargetKind != "etcd" ||
		res.Ops != 400 || res.Errors != 0 || res.Throughput <= 0 || res.Latency.P99 < res.Latency.P50 || res.Latency.P50 <= 0 {
		t.Fatalf("results.json: %+v", res)
	}
	f, err := os.Open(filepath.Join(out, "put.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) < 2 || rows[0][0] != "elapsed" || len(rows[0]) != 11 {
		t.Fatalf("put.csv: %v %v", rows, err)
	}

	// The same workload on Cairn, then a report pairing the two.
	c := newCluster(t, 3)
	cairnOut := filepath.Join(dir, "cairn-put")
	if b, err := exec.Command(binary, "bench", "--target", c.url(1)+","+c.url(2)+","+c.url(3), "--workload", "put",
		"--key-size", "8", "--val-size", "256", "--clients", "8", "--conns", "2", "--total", "400", "--http", "2",
		"--label", "cairn put", "--out", cairnOut).CombinedOutput(); err != nil {
		t.Fatalf("bench against Cairn: %v\n%s", err, b)
	}
	rep := filepath.Join(dir, "report")
	if b, err := exec.Command(binary, "report", cairnOut, out, "--out", rep).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	md, err := os.ReadFile(filepath.Join(rep, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	paired := false
	for _, line := range strings.Split(string(md), "\n") {
		paired = paired || (strings.HasPrefix(line, "| put | ") && strings.Contains(line, "×"))
	}
	if !paired {
		t.Fatalf("report.md has no side-by-side row for put:\n%s", md)
	}
}
