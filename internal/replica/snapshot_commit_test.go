package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// crashOptions are the engine options of a replica on fs.
func crashOptions(fs *storage.CrashableFS) storage.Options {
	return storage.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, FS: fs.FS()}
}

// A follower's round can carry a snapshot and, after it, entries the
// leader sent on top with a commit index past the snapshot's (both
// messages stepped before the round's Ready). The snapshot is ingested
// before the round's batch, which holds those entries, commits: a kill in
// between must not leave a hard state whose commit index is past the end
// of the log (raft panics at the next start: "state.commit is out of
// range"). Every kill point of the round restarts into a replica that
// opens.
func TestSnapshotRoundWithLaterEntriesSurvivesAKillAtAnyPoint(t *testing.T) {
	src := openNode(t, 1)
	fill(t, src, 50, 100, 100, "x")
	m := outgoingSnapshot(t, src)
	s, err := src.OpenSnapshot(m, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	chunks := readAll(t, s)
	s.Close()
	md := m.Snapshot.Metadata

	fs := storage.NewCrashableFS()
	eng, err := storage.Open("/data", crashOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	desc := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}, Epoch: 1}
	enq := make(chan struct{}, 16)
	dst, err := Open(Config{NodeID: 2, Desc: desc, Engine: eng, Logger: quiet,
		Send: func(uint64, []raftpb.Message) {}, Enqueue: func(uint64) { enq <- struct{}{} }}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dst.Stop)

	installed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, err := dst.ReceiveSnapshot(ctx, m, func() ([]byte, error) {
			if len(chunks) == 0 {
				return nil, io.EOF
			}
			b := chunks[0]
			chunks = chunks[1:]
			return b, nil
		})
		if err == nil && !ok {
			err = errors.New("the snapshot was refused")
		}
		installed <- err
	}()
	select {
	case <-enq: // the MsgSnap is in the inbox
	case err := <-installed:
		t.Fatalf("receive: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot never reached the inbox")
	}
	// The leader's next append, on top of the snapshot, commits past it.
	app := raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Term: m.Term, Index: md.Index, LogTerm: md.Term,
		Commit: md.Index + 2, Entries: []raftpb.Entry{{Term: m.Term, Index: md.Index + 1}, {Term: m.Term, Index: md.Index + 2}}}
	dst.Step(app)

	var mu sync.Mutex
	var points []*storage.CrashableFS
	fs.OnSync(func() {
		mu.Lock()
		points = append(points, fs.CrashClone(0, nil))
		mu.Unlock()
	})
	b := eng.NewBatch()
	rr, mustSync := dst.Stage(b)
	if rr == nil || !rr.hasSnap || len(rr.rd.Entries) == 0 || rr.rd.HardState.Commit <= md.Index {
		t.Fatalf("the round does not carry the snapshot at %d and later committed entries: %+v", md.Index, rr)
	}
	mu.Lock()
	points = append(points, fs.CrashClone(0, nil)) // ingested, the batch not committed
	mu.Unlock()
	if err := b.Commit(mustSync); err != nil {
		t.Fatal(err)
	}
	dst.Finish(rr)
	fs.OnSync(nil)
	if err := <-installed; err != nil {
		t.Fatalf("receive: %v", err)
	}
	// A sync hook that began before OnSync(nil) may still run (a flush in
	// the background): the points are taken under the lock.
	mu.Lock()
	points = append(points, fs.CrashClone(0, nil))
	taken := slices.Clone(points)
	mu.Unlock()

	for i, p := range taken {
		commit, err := restartAfterSnapshot(p, desc, md.Index)
		if err != nil {
			t.Errorf("kill point %d of %d: %v", i, len(taken), err)
		}
		if i == len(taken)-1 && commit != md.Index+2 {
			t.Errorf("after the round the hard state commits %d, want %d (the round's own)", commit, md.Index+2)
		}
	}
}

// restartAfterSnapshot opens node 2 of shard 1 on fs, as a restart does,
// checks that its hard state's commit index lies inside its log and that
// the replica opens, and returns that commit index.
func restartAfterSnapshot(fs *storage.CrashableFS, desc shard.Descriptor, snapIndex uint64) (commit uint64, err error) {
	eng, err := storage.Open("/data", crashOptions(fs))
	if err != nil {
		return 0, err
	}
	defer eng.Close()
	lg, as, err := raftlog.Open(eng, 1, nil)
	if err != nil {
		return 0, err
	}
	hs, _, _ := lg.InitialState()
	commit = hs.Commit
	_, last := lg.Bounds()
	if as.Index == snapIndex && hs.Commit > last {
		err = fmt.Errorf("snapshot installed (applied %d), hard state commit %d past the log's last index %d", as.Index, hs.Commit, last)
	}
	defer func() {
		if p := recover(); p != nil {
			err = errors.Join(err, fmt.Errorf("open panics: %v", p))
		}
	}()
	r, oerr := Open(Config{NodeID: 2, Desc: desc, Engine: eng, Logger: quiet,
		Send: func(uint64, []raftpb.Message) {}, Enqueue: func(uint64) {}}, false)
	if oerr != nil {
		return commit, errors.Join(err, fmt.Errorf("open: %w", oerr))
	}
	r.Stop()
	return commit, err
}
