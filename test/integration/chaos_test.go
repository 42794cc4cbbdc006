package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A short real chaos run: the leader of shard 1 is killed, then the new
// leader is isolated; every check must pass.
func TestChaosLeaderKillAndPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	out := t.TempDir()
	cmd := exec.Command(binary, "chaos", "--scenario", "leader-kill-partition", "--duration", "30s", "--out", out)
	b, err := cmd.CombinedOutput()
	t.Logf("%s", tail(string(b), 12))
	if err != nil {
		t.Fatalf("chaos run failed: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Scenario          string `json:"scenario"`
		Ops               int    `json:"ops"`
		Linearizable      bool   `json:"linearizable"`
		LostWrites        int    `json:"lost_writes"`
		AckedWrites       int    `json:"acked_writes"`
		ReplicasConverged bool   `json:"replicas_converged"`
		Faults            []struct {
			Kind          string `json:"kind"`
			Node          int    `json:"node"`
			StartMs       int64  `json:"start_ms"`
			EndMs         int64  `json:"end_ms"`
			UnavailableMs int64  `json:"unavailable_ms"`
			Error         string `json:"error"`
		} `json:"faults"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Linearizable || r.LostWrites != 0 || !r.ReplicasConverged || r.Ops < 100 || r.AckedWrites < 10 {
		t.Fatalf("checks: %+v", r)
	}
	if len(r.Faults) != 2 || r.Faults[0].Kind != "kill" || r.Faults[1].Kind != "partition" {
		t.Fatalf("faults: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" || f.Node == 0 || f.EndMs <= f.StartMs {
			t.Fatalf("fault %+v", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "throughput.svg")); err != nil {
		t.Fatal("no chart written")
	}
}

func TestFaultHookOffByDefault(t *testing.T) {
	c := newCluster(t, 3)
	r := c.do("POST", c.url(1)+"/v1/admin/fault?partition=2", nil)
	if r.code != 403 || !isJSONError(r.body) {
		t.Fatalf("fault hook without --fault-injection: %d %s", r.code, r.body)
	}
	r = c.do("GET", c.url(1)+"/v1/admin/hashes", nil)
	if r.code != 200 || !strings.Contains(r.body, `"hash"`) {
		t.Fatalf("hashes: %d %s", r.code, r.body)
	}
}
