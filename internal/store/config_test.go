package store

import (
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	eng := &storage.Engine{}
	c := Config{NodeID: 1, Engine: eng}.EnsureDefaults()
	if c.Workers != 8 || c.TickInterval.Milliseconds() != 100 || c.MaxSnapshots != 2 || c.Logger == nil ||
		c.ScrubInterval != 0 || c.ScrubWait.Seconds() != 30 {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Config{
		"NodeID":        {Engine: eng},
		"Engine":        {NodeID: 1},
		"Workers":       {NodeID: 1, Engine: eng, Workers: -2},
		"TickInterval":  {NodeID: 1, Engine: eng, TickInterval: -1},
		"MaxSnapshots":  {NodeID: 1, Engine: eng, MaxSnapshots: -1},
		"ScrubInterval": {NodeID: 1, Engine: eng, ScrubInterval: -1},
		"ScrubWait":     {NodeID: 1, Engine: eng, ScrubWait: -1},
	} {
		if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// The lease follows the tick and the election timeout: 90 % of the
// election timeout less three ticks; the defaults (100 ms, 10 ticks) give
// 630 ms, and a timeout too short for a margin gives none.
func TestLeaseDuration(t *testing.T) {
	eng := &storage.Engine{}
	for _, tc := range []struct {
		c    Config
		want time.Duration
	}{
		{Config{NodeID: 1, Engine: eng}, 630 * time.Millisecond},
		{Config{NodeID: 1, Engine: eng, TickInterval: 50 * time.Millisecond, ElectionTick: 20}, 765 * time.Millisecond},
		{Config{NodeID: 1, Engine: eng, ElectionTick: 2, HeartbeatTick: 1}, 0},
		{Config{NodeID: 1, Engine: eng, ElectionTick: 3, HeartbeatTick: 1}, 0},
	} {
		c := tc.c.EnsureDefaults()
		if got := c.LeaseDuration(); got != tc.want {
			t.Errorf("tick %s, election %d ticks: lease %s, want %s", c.TickInterval, c.ElectionTick, got, tc.want)
		}
	}
}

// Every replica the store opens drops vote requests for an election
// timeout after a restart, whatever the node's own --lease-reads: its
// peers may hold leases that counted on its answers (a rolling change of
// the flag).
func TestReplicasKeepTheRestartRuleWithLeaseReadsOff(t *testing.T) {
	for _, leases := range []bool{true, false} {
		s := &Store{cfg: Config{LeaseReads: leases}.EnsureDefaults(), sched: newSched(nil)}
		rc := s.replicaConfig(shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}})
		if !rc.PeersLease {
			t.Errorf("lease reads %v: the replica config does not keep the restart rule (PeersLease false)", leases)
		}
		if got := rc.LeaseDuration > 0; got != leases {
			t.Errorf("lease reads %v: the replica's own lease is %v", leases, rc.LeaseDuration)
		}
	}
}
