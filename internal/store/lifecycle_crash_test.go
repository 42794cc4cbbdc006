package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// crashNode is one store on a crashable in-memory filesystem, with no
// transport and no goroutines (Start is not called): the test drives
// its replica lifecycle by hand.
type crashNode struct {
	t   *testing.T
	fs  *storage.CrashableFS
	m   shard.Map
	eng *storage.Engine
	st  *Store
}

func crashEngineOptions(fs *storage.CrashableFS) storage.Options {
	return storage.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, FS: fs.FS()}
}

// newCrashNode bootstraps node 3 of shard 1 (voters 1, 2, 3).
func newCrashNode(t *testing.T) *crashNode {
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	n := &crashNode{t: t, fs: storage.NewCrashableFS(), m: m}
	if n.eng, err = storage.Open("/data", crashEngineOptions(n.fs)); err != nil {
		t.Fatal(err)
	}
	if n.st, err = New(Config{NodeID: 3, Engine: n.eng, Map: m, Logger: quiet}, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.st.Stop()
		n.eng.Close()
	})
	return n
}

// crashPoints runs op and returns the filesystem a crash after each of
// its syncs would leave, and the one a crash right after it would.
func (n *crashNode) crashPoints(op func()) []*storage.CrashableFS {
	var mu sync.Mutex
	var out []*storage.CrashableFS
	n.fs.OnSync(func() {
		mu.Lock()
		out = append(out, n.fs.CrashClone(0, nil))
		mu.Unlock()
	})
	op()
	n.fs.OnSync(nil)
	mu.Lock()
	defer mu.Unlock()
	return append(out, n.fs.CrashClone(0, nil))
}

// removalPoints removes the local replica of d and returns the kill
// points of the removal (crashPoints).
func (n *crashNode) removalPoints(t *testing.T, d shard.Descriptor) []*storage.CrashableFS {
	t.Helper()
	return n.crashPoints(func() {
		if err := n.st.removeLocal(d); err != nil {
			t.Fatal(err)
		}
	})
}

// restart opens a store (as a restart does: no bootstrap) on fs and
// calls check with it.
func (n *crashNode) restart(fs *storage.CrashableFS, check func(*Store)) error {
	eng, err := storage.Open("/data", crashEngineOptions(fs))
	if err != nil {
		return err
	}
	defer eng.Close()
	st, err := New(Config{NodeID: 3, Engine: eng, Map: n.m, Logger: quiet}, false)
	if err != nil {
		return err
	}
	defer st.Stop()
	check(st)
	return nil
}

// A replica moved away and then back to its node (a balancer's move, a
// scrub repair) is created over the tombstone of its removal. A kill at
// any instant of the creation must leave a node that starts, holding
// either the tombstone or the new replica: a bootstrap shard with
// neither has no state to open, and the node would not start again.
func TestCreateOverATombstoneSurvivesAKillAtAnyPoint(t *testing.T) {
	n := newCrashNode(t)
	removed, back := removedAndBack(n.st.Replica(1).Desc())
	if err := n.st.removeLocal(removed); err != nil {
		t.Fatal(err)
	}
	points := n.crashPoints(func() {
		if err := n.st.CreateReplica(back); err != nil {
			t.Fatal(err)
		}
	})
	for i, fs := range points {
		err := n.restart(fs, func(st *Store) {
			_, dead := st.tombstone(1)
			r := st.Replica(1)
			switch {
			case r == nil && !dead:
				t.Errorf("kill point %d of %d: neither the replica nor its tombstone", i, len(points))
			case r != nil && dead:
				t.Errorf("kill point %d of %d: the replica and a tombstone", i, len(points))
			case r != nil && r.Desc().Epoch != back.Epoch:
				t.Errorf("kill point %d of %d: replica at epoch %d, want %d", i, len(points), r.Desc().Epoch, back.Epoch)
			}
		})
		if err != nil {
			t.Errorf("kill point %d of %d: the node does not start: %v", i, len(points), err)
		}
	}
}

// removedAndBack returns the descriptor that removes node 3 from shard 1
// (old's next epoch) and the one that adds it back as a learner.
func removedAndBack(old shard.Descriptor) (removed, back shard.Descriptor) {
	removed = old.Clone()
	removed.Epoch++
	removed.Replicas = []uint64{1, 2, 4}
	back = removed.Clone()
	back.Epoch++
	back.Learners = []uint64{3}
	return removed, back
}

// checkAlive fails unless st holds shard 1's replica at d's epoch, its
// state in the engine and no tombstone, and a restart from what is
// synced opens it again.
func (n *crashNode) checkAlive(d shard.Descriptor) {
	t := n.t
	t.Helper()
	if r := n.st.Replica(1); r == nil || r.Desc().Epoch != d.Epoch {
		t.Fatalf("shard 1's replica: %v, want the one created at epoch %d", r, d.Epoch)
	}
	if _, dead := n.st.tombstone(1); dead {
		t.Error("a tombstone of shard 1 under its live replica")
	}
	if has, err := raftlog.Exists(n.eng, 1); err != nil || !has {
		t.Errorf("the live replica's raft state is gone (%v)", err)
	}
	err := n.restart(n.fs.CrashClone(0, nil), func(st *Store) {
		if st.Replica(1) == nil {
			t.Error("after a restart the node no longer opens its replica of shard 1")
		}
	})
	if err != nil {
		t.Errorf("restart: %v", err)
	}
}

// The same removal can reach removeLocal twice: from the reaper (the
// replica applied the conf change) and from a scrub repair or the
// orphan collector (the members' descriptor no longer lists the node).
// A second call that comes once the node holds a newer replica of the
// shard (the repair added it back) must leave that replica alone.
func TestLateRemovalLeavesANewerReplicaAlone(t *testing.T) {
	n := newCrashNode(t)
	removed, back := removedAndBack(n.st.Replica(1).Desc())
	if err := n.st.removeLocal(removed); err != nil {
		t.Fatal(err)
	}
	if err := n.st.CreateReplica(back); err != nil {
		t.Fatal(err)
	}
	if err := n.st.removeLocal(removed); err != nil {
		t.Fatal(err)
	}
	n.checkAlive(back)
}

// A creation that arrives while the removal of the shard's previous
// replica is still under way (the replica is out of the store, stopping
// it waits for its round, its state is not deleted yet) waits for the
// removal and then succeeds. It was refused ("has state already"), and
// the move or scrub repair that asked for it failed as a bad change,
// never retried: the scrub repair's removal is usually both the
// reaper's and its own, and it adds the node back as soon as the
// replica is out of the store.
func TestCreationWaitsForARemovalUnderWay(t *testing.T) {
	n := newCrashNode(t)
	r := n.st.Replica(1)
	removed, back := removedAndBack(r.Desc())
	// A round in progress: the removal's Stop waits for it.
	r.Campaign()
	b := n.eng.NewBatch()
	rr, sync := r.Stage(b)
	if rr == nil {
		t.Fatal("no round to hold")
	}
	removedDone := make(chan error, 1)
	go func() { removedDone <- n.st.removeLocal(removed) }()
	for deadline := time.Now().Add(5 * time.Second); n.st.Replica(1) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("the removal did not start")
		}
		time.Sleep(time.Millisecond)
	}
	created := make(chan error, 1)
	go func() { created <- n.st.CreateReplica(back) }()
	select {
	case err := <-created: // before the removal finished
		created <- err
	case <-time.After(100 * time.Millisecond):
	}
	if err := b.Commit(sync); err != nil {
		t.Fatal(err)
	}
	r.Finish(rr)
	if err := <-removedDone; err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	n.checkAlive(back)
}

// A removal killed at any instant leaves either the replica (its removal
// not done: the reaper's or the orphan collector's next run, or the next
// start, does it) or its tombstone with none of its state or data; never
// the replica's state under a tombstone, nor a tombstone-less node
// without it.
func TestRemovalSurvivesAKillAtAnyPoint(t *testing.T) {
	n := newCrashNode(t)
	removed, _ := removedAndBack(n.st.Replica(1).Desc())
	// Some data in the replica's range.
	b := n.eng.NewBatch()
	for i := range 10 {
		k := []byte(fmt.Sprint("k", i))
		b.Set(storage.DataKey(shard.Token(k), k), storage.EncodeValue(6, k))
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	points := n.removalPoints(t, removed)
	for i, fs := range points {
		err := n.restart(fs, func(st *Store) {
			_, dead := st.tombstone(1)
			has, err := raftlog.Exists(st.cfg.Engine, 1)
			if err != nil {
				t.Fatal(err)
			}
			ds, de := storage.DataSpan(removed.Start, removed.End)
			it, err := st.cfg.Engine.NewIter(ds, de)
			if err != nil {
				t.Fatal(err)
			}
			data := it.First()
			it.Close()
			switch {
			case dead && (has || data || st.Replica(1) != nil):
				t.Errorf("kill point %d of %d: tombstone with state %v, data %v, replica %v", i, len(points), has, data, st.Replica(1) != nil)
			case !dead && st.Replica(1) == nil:
				t.Errorf("kill point %d of %d: neither the replica nor its tombstone", i, len(points))
			}
		})
		if err != nil {
			t.Errorf("kill point %d of %d: the node does not start: %v", i, len(points), err)
		}
	}
}

// A split killed at any instant (its apply batch is not synced on its
// own; the new shard's first synced writes make it durable) restarts
// into either the shard whole and no new shard, or both halves: the
// lower half's end is the new shard's start, both at the next epoch.
func TestSplitSurvivesAKillAtAnyPoint(t *testing.T) {
	m, err := shard.Bootstrap([]uint64{1}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	fs := storage.NewCrashableFS()
	eng, err := storage.Open("/data", crashEngineOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cfg := Config{NodeID: 1, Engine: eng, Map: m, TickInterval: 10 * time.Millisecond,
		BalanceInterval: -1, SickThreshold: -1, OrphanInterval: -1, Logger: quiet}
	st, err := New(cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	st.Start(true)
	defer st.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(key string) {
		t.Helper()
		cmd := wire.Command{RequestID: []byte(key), Op: wire.OpPut, Key: []byte(key), Value: []byte(key)}
		for {
			d, _ := st.Route(shard.Token(cmd.Key))
			if r := st.Replica(d.ID); r != nil && r.IsLeader() {
				res, err := r.ProposeEncoded(ctx, cmd.RequestID, cmd.Key, cmd.Marshal())
				if err == nil && res.Status == wire.StatusOK {
					return
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("put %s: %v", key, ctx.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range 5 {
		put(fmt.Sprint("a", i))
	}
	whole := st.Replica(1).Desc()
	var mu sync.Mutex
	var points []*storage.CrashableFS
	fs.OnSync(func() {
		mu.Lock()
		points = append(points, fs.CrashClone(0, nil))
		mu.Unlock()
	})
	child, err := st.SplitShard(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		put(fmt.Sprint("b", i))
	}
	fs.OnSync(nil)
	mu.Lock()
	defer mu.Unlock()
	split := 0
	for i, p := range points {
		peng, err := storage.Open("/data", crashEngineOptions(p))
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Engine = peng
		pst, err := New(c, false)
		if err != nil {
			t.Errorf("kill point %d of %d: the node does not start: %v", i, len(points), err)
			peng.Close()
			continue
		}
		lower, upper := pst.Replica(1), pst.Replica(child.ID)
		switch {
		case lower == nil:
			t.Errorf("kill point %d of %d: no replica of shard 1", i, len(points))
		case lower.Desc().End == whole.End && upper == nil && lower.Desc().Epoch == whole.Epoch:
		case lower.Desc().End == child.Start && upper != nil && upper.Desc().Start == child.Start &&
			upper.Desc().End == whole.End && upper.Desc().Epoch == whole.Epoch+1 && lower.Desc().Epoch == whole.Epoch+1:
			split++
		default:
			var ud any
			if upper != nil {
				ud = upper.Desc()
			}
			t.Errorf("kill point %d of %d: shard 1 %+v, new shard %v", i, len(points), lower.Desc(), ud)
		}
		pst.Stop()
		peng.Close()
	}
	if split == 0 || split == len(points) {
		t.Errorf("%d of the %d kill points hold the split: want some before it and some after", split, len(points))
	}
	t.Logf("%d kill points, %d after the split", len(points), split)
}

// A creation that finds a replica which applied its own removal and
// waits for the reaper deletes it and creates a new one: the removed
// replica stays marked removed (the coordinator serves nothing from it)
// and must not stand in for the replica the shard is adding.
func TestCreationReplacesARemovedReplica(t *testing.T) {
	n := newCrashNode(t)
	old := n.st.Replica(1).Desc()
	removed, back := removedAndBack(old)
	// The replica as it is once it applied the conf change that removed
	// node 3, its removal queued for the reaper (not running here).
	n.st.Replica(1).Stop()
	as := raftlog.AppliedState{Index: raftlog.InitIndex, Term: raftlog.InitTerm,
		ConfState: raftpb.ConfState{Voters: removed.Replicas}}
	b := n.eng.NewBatch()
	b.Set(storage.AppliedKey(1), as.Marshal())
	b.Set(storage.DescriptorKey(1), removed.Marshal())
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	r, err := replica.Open(n.st.replicaConfig(old), false) // the stored descriptor wins
	if err != nil {
		t.Fatal(err)
	}
	if !r.Removed() {
		t.Fatal("the replica does not know it was removed")
	}
	n.st.mu.Lock()
	n.st.mu.replicas[1] = r
	n.st.mu.Unlock()
	n.st.queueRemoval(removed)
	if err := n.st.CreateReplica(back); err != nil {
		t.Fatal(err)
	}
	if got := n.st.Replica(1); got == r || got.Removed() {
		t.Fatalf("CreateReplica at epoch %d left the removed replica in place", back.Epoch)
	}
	n.checkAlive(back)
}

// A removal killed at any instant never leaves the removed range's
// key-order and index entries without their data: a node that restarts
// with the replica's tombstone holds none of them. (Entries left behind
// would be served again once the node holds a replica of the range
// again: a snapshot's ingestion replaces only the entries of the objects
// the range holds, and a listing would answer keys long deleted.)
func TestRemovalDropsDerivedEntriesAtAnyKillPoint(t *testing.T) {
	n := newCrashNode(t)
	removed, _ := removedAndBack(n.st.Replica(1).Desc())
	b := n.eng.NewBatch()
	x := []wire.IndexTerm{{Name: "x_bin", Term: []byte("t")}}
	for i := range 10 {
		k := []byte(fmt.Sprint("k", i))
		tok := shard.Token(k)
		b.Set(storage.DataKey(tok, k), storage.EncodeValueMeta(6, x, k))
		storage.DerivedWrites(tok, k, nil, false, x, false, b.Delete, b.Set)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	points := n.removalPoints(t, removed)
	for i, fs := range points {
		err := n.restart(fs, func(st *Store) {
			if _, dead := st.tombstone(1); !dead {
				return
			}
			it, err := st.cfg.Engine.NewIter(storage.KeyOrderPrefix(), storage.IndexPrefix("x_bin")[:1:1])
			if err != nil {
				t.Fatal(err)
			}
			if it.First() {
				t.Errorf("kill point %d of %d: the removed replica's data is gone, its derived entry %q is left", i, len(points), it.Key())
			}
			it.Close()
			it, err = st.cfg.Engine.NewIter(storage.IndexPrefix("x_bin"), storage.PrefixEnd(storage.IndexPrefix("x_bin")))
			if err != nil {
				t.Fatal(err)
			}
			if it.First() {
				t.Errorf("kill point %d of %d: the removed replica's data is gone, its index entry %q is left", i, len(points), it.Key())
			}
			it.Close()
		})
		if err != nil {
			t.Errorf("kill point %d of %d: the node does not start: %v", i, len(points), err)
		}
	}
}
