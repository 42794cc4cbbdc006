package integration

import "testing"

// The read-replica chaos scenario (about 40 s): a 4th node joins under
// load as a read replica and must hold a learner of every shard and no
// voter, then the leader of shard 1 is killed with -9, then writes
// acknowledged through a voter must be read back from the read replica
// (serializable, served by its own learners); the history must be linearizable, nothing lost, the
// replicas converged. A failed heal check is the fault's error, which
// runChaos fails on.
func TestChaosReadReplica(t *testing.T) {
	r := runChaos(t, "--scenario", "read-replica", "--duration", "30s")
	if len(r.Faults) != 3 || r.Faults[0].Kind != "read-replica" || r.Faults[1].Kind != "kill" || r.Faults[2].Kind != "read-replica-reads" {
		t.Fatalf("faults: %+v", r.Faults)
	}
}
