package integration

import (
	"testing"
)

// depthResult is the part of a chaos run's results.json the depth tests
// check beyond chaosResult.
type depthResult struct {
	chaosResult
	AppliedTwice []string `json:"applied_twice"`
}

// runChaosDepth runs `cairn chaos` with args into a directory of its own
// and returns its results.json and whether the command passed.
func runChaosDepth(t *testing.T, args ...string) (depthResult, string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes")
	}
	out := t.TempDir()
	var r depthResult
	runErr := chaosInto(t, out, args, &r)
	return r, out, runErr
}

// The leader's clocks run 2 minutes ahead mid-run, then step back: the
// shard clock that ages dedup records steps by at most one clamped step,
// and every check passes — linearizable, no acknowledged write lost, no
// write applied twice, replicas converged.
func TestChaosClockSkewLeader(t *testing.T) {
	r, _, err := runChaosDepth(t, "--scenario", "clock-skew-leader", "--duration", "20s")
	if err != nil {
		t.Fatalf("chaos run failed: %v", err)
	}
	if !r.Linearizable || r.LostWrites != 0 || !r.ReplicasConverged || r.AppliedTwice == nil || len(r.AppliedTwice) != 0 || r.Ops < 100 {
		t.Fatalf("checks: %+v", r)
	}
	if len(r.Faults) != 1 || r.Faults[0].Kind != "clock-skew" || r.Faults[0].Error != "" || r.Faults[0].Node == 0 {
		t.Fatalf("faults: %+v", r.Faults)
	}
}

// The leader's disk is full for a while: it answers new values with 507
// and hands its leaderships away, the other nodes keep taking writes,
// nothing is lost, and the node takes values again once healed.
func TestChaosDiskFullLeader(t *testing.T) {
	r, _, err := runChaosDepth(t, "--scenario", "disk-full-leader", "--duration", "20s")
	if err != nil {
		t.Fatalf("chaos run failed: %v", err)
	}
	if !r.Linearizable || r.LostWrites != 0 || !r.ReplicasConverged || len(r.AppliedTwice) != 0 {
		t.Fatalf("checks: %+v", r)
	}
	if len(r.Faults) != 1 || r.Faults[0].Kind != "disk-full" || r.Faults[0].Error != "" {
		t.Fatalf("faults: %+v", r.Faults)
	}
}

// A follower's replica is damaged while its node is down (every value of
// one shard inverted, checksums intact): the run passes only if the
// node's scrub reports the mismatch and repairs the replica (the fault's
// healing fails otherwise) and no read returned a damaged value (the
// linearizability check reads the register keys the shard holds).
func TestChaosCorruptFollower(t *testing.T) {
	r, _, err := runChaosDepth(t, "--scenario", "corrupt-follower", "--duration", "25s")
	if err != nil {
		t.Fatalf("chaos run failed: %v", err)
	}
	if !r.Linearizable || r.LostWrites != 0 || !r.ReplicasConverged || len(r.AppliedTwice) != 0 || r.Ops < 100 {
		t.Fatalf("checks: %+v", r)
	}
	if len(r.Faults) != 1 || r.Faults[0].Kind != "corrupt" || r.Faults[0].Error != "" || r.Faults[0].Node == 0 {
		t.Fatalf("faults: %+v", r.Faults)
	}
}
