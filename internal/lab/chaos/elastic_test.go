package chaos

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/client"
)

func TestShareWithinProblem(t *testing.T) {
	// 3 shards x 3 voters over 4 active nodes: a share of 2 or 3.
	one := shards(sh(1, 1, 1, 2, 4), sh(2, 2, 1, 2, 3), sh(3, 3, 1, 2, 3))
	if got := shareWithinProblem(one, 4); !strings.Contains(got, "its share is 2") {
		t.Errorf("one replica of a share of 2: %q", got)
	}
	for _, ci := range []struct {
		name string
		in   []uint64 // the shards node 4 holds a replica of
	}{{"two", []uint64{1, 2}}, {"three", []uint64{1, 2, 3}}} {
		got := shareWithinProblem(shards(holding(ci.in)...), 4)
		if got != "" {
			t.Errorf("%s replicas: %q", ci.name, got)
		}
	}
	// 6 shards over 4 nodes (a share of 4 or 5): 6 is one too many.
	all := shards(holding([]uint64{1, 2, 3, 4, 5, 6})...)
	if got := shareWithinProblem(all, 4); !strings.Contains(got, "above its share of 5") {
		t.Errorf("every shard on node 4: %q", got)
	}
	// Decommissioning members take no share: 9 voters over 3 active nodes.
	draining := shards(holding([]uint64{1, 2})...)
	draining.Members[0].State = "decommissioning"
	if got := shareWithinProblem(draining, 4); !strings.Contains(got, "its share is 3") {
		t.Errorf("two of 9 replicas with 3 active nodes: %q", got)
	}
}

// holding builds 3 shards (or as many as ids name, at least 3) with node
// 4 a voter of those listed in ids.
func holding(ids []uint64) []client.ShardInfo {
	n := max(3, len(ids))
	out := make([]client.ShardInfo, n)
	for i := range out {
		id := uint64(i + 1)
		out[i] = sh(id, 1, 1, 2, 3)
		for _, x := range ids {
			if x == id {
				out[i] = sh(id, 1, 1, 2, 4)
			}
		}
	}
	return out
}

func TestElasticFailuresCountClientErrors(t *testing.T) {
	e := &ElasticCheck{Problems: []string{"a step's own error"}}
	if got := e.Failures(0); len(got) != 0 {
		t.Errorf("no client error: %v (a step's problem fails the run through its step)", got)
	}
	if got := e.Failures(3); len(got) != 1 || !strings.Contains(got[0], "3 client-visible errors") {
		t.Errorf("3 client errors: %v", got)
	}
}

func TestConfigRefusesANegativeSnapshotRate(t *testing.T) {
	neg, zero := int64(-1), int64(0)
	c := Config{Bin: "cairn", Dir: "/tmp/x", SnapshotRate: &neg}.EnsureDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SnapshotRate") {
		t.Errorf("a rate of -1: %v", err)
	}
	c.SnapshotRate = &zero // unlimited
	if err := c.Validate(); err != nil {
		t.Errorf("a rate of 0 (unlimited): %v", err)
	}
}
