package integration

import "testing"

// The chaos scenario whose clients speak the etcd API (about 35 s): etcd's
// Go client reads (linearizable Ranges), puts and compare-and-swaps (Txn
// on the value) through every node while the leader of shard 1 is killed,
// then the new leader isolated; the history must be linearizable, no
// acknowledged put lost, the replicas converged.
func TestChaosEtcdAPI(t *testing.T) {
	r := runChaos(t, "--scenario", "etcd-api", "--duration", "30s")
	if r.Client != "etcd" || r.Scenario != "etcd-api" {
		t.Fatalf("scenario %q client %q, want etcd-api with etcd clients", r.Scenario, r.Client)
	}
	if len(r.Faults) != 2 || r.Faults[0].Kind != "kill" || r.Faults[1].Kind != "partition" {
		t.Fatalf("faults: %+v", r.Faults)
	}
}
