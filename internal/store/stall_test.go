package store

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// A replica whose rounds stop taking its ticks is reported once it holds
// three election timeouts of them, with the goroutines' stacks the first
// time (and not again within stallDumpEvery).
func TestStalledReplicaIsReported(t *testing.T) {
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	var logged bytes.Buffer
	s := &Store{cfg: Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))}.EnsureDefaults(), sched: newSched([]uint64{1})}
	r, err := replica.Open(replica.Config{NodeID: 1, Desc: shard.Descriptor{ID: 1, Replicas: []uint64{1}}, Engine: eng,
		Logger: s.cfg.Logger, Send: func(uint64, []raftpb.Message) {}, Enqueue: s.sched.enqueue}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	// No worker runs the replica's rounds: its ticks pile up.
	for i := 1; i <= s.stallTicks(); i++ {
		if n := r.Tick(); n != i {
			t.Fatalf("tick %d: %d pending, want %d", i, n, i)
		}
	}
	if got := s.sched.stateName(1); got != "queued" {
		t.Errorf("scheduler state %q, want queued", got)
	}
	s.reportStall(r, s.stallTicks())
	first := logged.String()
	for _, want := range []string{"replica stalled", "shard=1", "ticks_pending=30", "for=3s", "scheduler=queued", "goroutines=", "TestStalledReplicaIsReported"} {
		if !strings.Contains(first, want) {
			t.Errorf("first report lacks %q:\n%.600s", want, first)
		}
	}
	logged.Reset()
	s.reportStall(r, s.stallTicks())
	if second := logged.String(); !strings.Contains(second, "replica stalled") || strings.Contains(second, "goroutines=") {
		t.Errorf("second report within %v: want the warning without stacks, got:\n%.600s", stallDumpEvery, second)
	}
}
