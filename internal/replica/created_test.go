package replica

import (
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// A replica reopened with a term after bootstrap may have answered a
// leader within its lease, so it drops vote requests for an election
// timeout — whether or not its own node serves lease reads, since its
// peers may (PeersLease, which the store always sets). The new half of a split (Config.Created) has answered no
// leader of its shard yet: it votes at once, so the leader campaigning
// for it wins at once.
func TestRestartRuleSparesReplicasASplitCreated(t *testing.T) {
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	base := Config{NodeID: 1, Desc: shard.Descriptor{ID: 1, Replicas: []uint64{1}}, Engine: eng, Logger: quiet,
		Send: func(uint64, []raftpb.Message) {}, Enqueue: func(uint64) {}, PeersLease: true}
	first, err := Open(base, true)
	if err != nil {
		t.Fatal(err)
	}
	first.Campaign()
	for i := 0; i < 10 && !first.IsLeader(); i++ {
		first.Process()
	}
	if !first.IsLeader() {
		t.Fatal("a one-replica shard did not elect itself")
	}
	first.Stop()

	vote := &raftpb.Message{Type: raftpb.MsgVote, From: 2, To: 1, Term: 99}
	for _, c := range []struct {
		name     string
		created  bool
		leaseOff bool
		refuses  bool
	}{
		{"reopened", false, false, true},
		{"reopened, lease reads off here", false, true, true},
		{"created by a split", true, false, false},
	} {
		cfg := base
		cfg.Created = c.created
		if c.leaseOff {
			cfg.LeaseDuration = 0
		} else {
			cfg.LeaseDuration = 630e6
		}
		r, err := Open(cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		got := r.refusesVotesLocked(vote)
		r.countTicksLocked(cfg.EnsureDefaults().ElectionTick)
		after := r.refusesVotesLocked(vote)
		r.mu.Unlock()
		r.Stop()
		if got != c.refuses {
			t.Errorf("%s: refuses votes at open = %v, want %v", c.name, got, c.refuses)
		}
		if after {
			t.Errorf("%s: still refuses votes after an election timeout of ticks", c.name)
		}
	}
}
