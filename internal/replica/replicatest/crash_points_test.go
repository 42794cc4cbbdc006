package replicatest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// A replica killed at any instant — after any sync of its engine, with
// or without some of the writes not synced yet: the leader appending,
// applying and truncating its log; a follower doing the same, missing
// entries the leader cut, receiving and installing a snapshot, then going
// on — must restart into a consistent replica: its applied index between
// its truncation point and its commit index, every entry after the
// applied index up to the commit index in its log, the data of exactly
// the writes at or below the applied index, a descriptor that matches
// its conf state, no staged snapshot file left, and a replica that opens.
func TestKilledAtEverySync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := New(Options{Seed: 1})
		defer env.Close()
		must(t, env.AddNodes(3, nodeConfig{TruncateThreshold: 3, TruncateKeep: 1, TruncateBytes: 1 << 30, CutPastDown: true}))
		env.Node(1).Replica.Campaign()
		_, err := env.ProcessReady(1)
		must(t, err)
		must(t, env.Stabilize())
		versions := map[string]uint64{}
		put := func(key string) {
			op, err := env.Propose(1, wire.Command{Op: wire.OpPut, Key: []byte(key), Value: []byte(key)})
			must(t, err)
			must(t, env.Stabilize())
			if !op.Done() || op.err != nil {
				t.Fatalf("put %s: done %v, %v", key, op.Done(), op.err)
			}
			versions[key] = op.res.Index
		}
		var mu sync.Mutex
		points := map[uint64][]*storage.CrashableFS{}
		for _, id := range []uint64{1, 3} { // the leader and the follower
			fs := env.Node(id).fs
			fs.OnSync(func() {
				// What was synced, and what was synced with half the
				// unsynced writes since (a crash keeps some of them).
				mu.Lock()
				rng := rand.New(rand.NewPCG(uint64(len(points[id])), id))
				points[id] = append(points[id], fs.CrashClone(0, nil), fs.CrashClone(50, rng))
				mu.Unlock()
			})
		}
		for i := range 5 {
			put(fmt.Sprint("a", i))
		}
		// Node 3 misses writes the leader truncates past: it catches up by
		// a snapshot.
		env.partition([][]uint64{{3}, {1, 2}})
		for range env.electionTick() / env.heartbeatTick() {
			// The leader finds node 3 inactive (so its log is cut past it).
			must(t, env.Tick(1, env.heartbeatTick()))
			must(t, env.Stabilize())
		}
		for i := range 10 {
			put(fmt.Sprint("b", i))
		}
		clear(env.net.cut)
		must(t, env.Tick(1, env.heartbeatTick()))
		must(t, env.Stabilize())
		for i := range 10 {
			put(fmt.Sprint("c", i))
		}
		env.Node(1).fs.OnSync(nil)
		env.Node(3).fs.OnSync(nil)
		if _, last := env.Node(3).Replica.LogBounds(); env.Node(3).Replica.Applied() != last {
			t.Fatalf("node 3 did not catch up: applied %d, log ends at %d", env.Node(3).Replica.Applied(), last)
		}
		if first, _ := env.Node(3).Replica.LogBounds(); first <= 21 {
			t.Fatalf("node 3's log starts at %d: it truncated nothing since the snapshot", first)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range []uint64{1, 3} {
			ps := append(points[id], env.Node(id).fs.CrashClone(0, nil))
			var applied []uint64
			for i, p := range ps {
				a, err := checkRestart(p, id, env.desc, versions)
				if err != nil {
					t.Errorf("node %d, kill point %d of %d: %v", id, i, len(ps), err)
				}
				applied = append(applied, a)
			}
			t.Logf("node %d: %d kill points, applied indexes %v", id, len(ps), slices.Compact(applied))
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkRestart checks what a restart of node id finds on fs (see
// TestKilledAtEverySync) and returns its applied index.
func checkRestart(fs *storage.CrashableFS, id uint64, desc shard.Descriptor, versions map[string]uint64) (uint64, error) {
	eng, err := storage.Open(dataDir, engineOptions(fs))
	if err != nil {
		return 0, err
	}
	defer eng.Close()
	var bad []error
	if left, err := fs.FS().List(eng.StagingDir()); err != nil || len(left) > 0 {
		bad = append(bad, fmt.Errorf("staged files left: %v (%v)", left, err))
	}
	lg, as, err := raftlog.Open(eng, ShardID, nil)
	if err != nil {
		return 0, err
	}
	hs, cs, _ := lg.InitialState()
	first, last := lg.Bounds()
	if as.Index+1 < first || as.Index > hs.Commit || hs.Commit > last {
		bad = append(bad, fmt.Errorf("log [%d,%d], applied %d, commit %d", first, last, as.Index, hs.Commit))
	} else if as.Index < hs.Commit {
		if _, err := lg.Entries(as.Index+1, hs.Commit+1, 1<<30); err != nil {
			bad = append(bad, fmt.Errorf("entries (%d,%d] after the applied index: %v", as.Index, hs.Commit, err))
		}
	}
	d, found, err := replica.StoredDescriptor(eng, ShardID)
	switch {
	case err != nil || !found:
		bad = append(bad, fmt.Errorf("descriptor: found %v, %v", found, err))
	case !slices.Equal(slices.Sorted(slices.Values(d.Replicas)), slices.Sorted(slices.Values(cs.Voters))):
		bad = append(bad, fmt.Errorf("descriptor voters %v, conf state %v", d.Replicas, cs.Voters))
	}
	for k, v := range versions {
		b, err := eng.Get(storage.DataKey(shard.Token([]byte(k)), []byte(k)))
		var got uint64
		if err == nil {
			got, _, err = storage.DecodeValue(b)
		} else if errors.Is(err, storage.ErrNotFound) {
			err = nil
		}
		want := v
		if v > as.Index {
			want = 0
		}
		if err != nil || got != want {
			bad = append(bad, fmt.Errorf("applied %d: %s at version %d (%v), want %d", as.Index, k, got, err, want))
		}
	}
	r, err := replica.Open(replica.Config{NodeID: id, Desc: desc, Engine: eng,
		Send: func(uint64, []raftpb.Message) {}, Enqueue: func(uint64) {},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, false)
	if err != nil {
		bad = append(bad, fmt.Errorf("open: %w", err))
	} else {
		r.Stop()
	}
	return as.Index, errors.Join(bad...)
}
