package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Issue 14's acceptance run at a small scale (`cairn chaos --scenario
// elastic` with 2,000 records on 3 shards instead of 100,000 on 12): a 4th
// node joins under load and takes its share, every record is read
// through it, node 1 drains, leaves and exits; the history is
// linearizable, nothing acknowledged is lost and no client saw an error.
func TestChaosElastic(t *testing.T) {
	out := t.TempDir()
	r := runChaosIn(t, out, "--scenario", "elastic", "--preload", "2000", "--shards", "3", "--duration", "30s")
	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ClientErrors map[string]uint64 `json:"client_errors"`
		Elastic      *struct {
			Joined, Drained, Held, Replicas, Active int
			Keys                                    uint64 `json:"keys"`
			KeysRead                                uint64 `json:"keys_read"`
			BalanceMs                               int64  `json:"balance_ms"`
			DrainMs                                 int64  `json:"drain_ms"`
			LoadRan                                 bool   `json:"load_ran"`
		} `json:"elastic"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	e := res.Elastic
	if e == nil || e.Joined != 4 || e.Drained != 1 {
		t.Fatalf("elastic check: %+v", e)
	}
	if e.Keys != 2000 || e.KeysRead != 2000 || e.BalanceMs < 0 || e.DrainMs < 0 || !e.LoadRan {
		t.Fatalf("elastic check: %+v", *e)
	}
	if e.Held < e.Replicas/e.Active || e.Held > (e.Replicas+e.Active-1)/e.Active {
		t.Fatalf("node 4 holds %d of %d replicas with %d active nodes", e.Held, e.Replicas, e.Active)
	}
	for k, n := range res.ClientErrors {
		if n > 0 {
			t.Errorf("%d client errors of kind %s", n, k)
		}
	}
	if len(r.Faults) != 2 {
		t.Fatalf("faults: %+v", r.Faults)
	}
}
