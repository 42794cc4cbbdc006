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

// The lease scenario (about 50 s): lease workers grant, keep alive,
// revoke and abandon etcd leases with a key each beside the etcd-api
// clients, through a kill -9, a partition and a pause of a leader; no
// read may find a just-renewed lease's key gone, and every key of an
// ended lease must be deleted after healing.
func TestChaosLease(t *testing.T) {
	r := runChaos(t, "--scenario", "lease", "--duration", "30s")
	l := r.Leases
	if l == nil || r.Client != "etcd" {
		t.Fatalf("no lease check (client %q)", r.Client)
	}
	if len(l.Violations) > 0 || len(l.KeysLeft) > 0 || l.Error != "" {
		t.Fatalf("lease check: %+v", *l)
	}
	if l.Granted < 10 || l.Kept == 0 || l.Revoked == 0 || l.Abandoned == 0 || l.KeepAlives == 0 || l.Reads == 0 || l.ToVanish == 0 {
		t.Fatalf("too little lease work to judge: %+v", *l)
	}
	if len(r.Faults) != 3 || r.Faults[2].Kind != "pause" {
		t.Fatalf("faults: %+v", r.Faults)
	}
}
