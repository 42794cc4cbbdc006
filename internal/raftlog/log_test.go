package raftlog

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

func openTest(t *testing.T) (*storage.Engine, *Log) {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if err := Bootstrap(eng, 3, []uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	l, as, err := Open(eng, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if as.Index != InitIndex || len(as.ConfState.Voters) != 3 {
		t.Fatalf("applied state after bootstrap: %+v", as)
	}
	return eng, l
}

func ents(term uint64, from, to uint64) []raftpb.Entry {
	var out []raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, raftpb.Entry{Index: i, Term: term, Data: []byte{byte(i)}})
	}
	return out
}

func persist(t *testing.T, eng *storage.Engine, l *Log, hs raftpb.HardState, es []raftpb.Entry) {
	t.Helper()
	b := eng.NewBatch()
	hook := l.StageReady(b, hs, es, raftpb.Snapshot{})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	hook()
}

func TestBootstrapBounds(t *testing.T) {
	_, l := openTest(t)
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != InitIndex+1 || last != InitIndex {
		t.Fatalf("first %d last %d", first, last)
	}
	if term, err := l.Term(InitIndex); err != nil || term != InitTerm {
		t.Fatalf("term at init index: %d %v", term, err)
	}
	if _, err := l.Term(InitIndex - 1); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("below init index: %v", err)
	}
	if _, err := l.Term(InitIndex + 1); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("above last: %v", err)
	}
}

func TestAppendOverwriteAndReopen(t *testing.T) {
	eng, l := openTest(t)
	persist(t, eng, l, raftpb.HardState{Term: 6, Vote: 1, Commit: 5}, ents(6, 6, 15))
	// A new leader overwrites 11..15 with a shorter suffix 11..12.
	persist(t, eng, l, raftpb.HardState{Term: 7, Vote: 2, Commit: 10}, ents(7, 11, 12))
	if last, _ := l.LastIndex(); last != 12 {
		t.Fatalf("last %d want 12", last)
	}
	es, err := l.Entries(6, 13, 1<<30)
	if err != nil || len(es) != 7 || es[6].Term != 7 || es[4].Term != 6 {
		t.Fatalf("entries: %d %v", len(es), err)
	}
	if es, _ := l.Entries(6, 13, 1); len(es) != 1 {
		t.Fatalf("maxSize 1 returned %d entries, want 1", len(es))
	}
	// Reopen: the stale suffix 13..15 must be gone and state preserved.
	l2, _, err := Open(eng, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, _, _ := l2.InitialState()
	if last, _ := l2.LastIndex(); last != 12 || hs.Term != 7 || hs.Vote != 2 || hs.Commit != 10 {
		t.Fatalf("after reopen: last %d hs %+v", last, hs)
	}
}

func TestTruncate(t *testing.T) {
	eng, l := openTest(t)
	persist(t, eng, l, raftpb.HardState{Term: 6, Commit: 20}, ents(6, 6, 20))
	b := eng.NewBatch()
	hook, err := l.StageTruncate(b, 15)
	if err != nil || hook == nil {
		t.Fatalf("truncate: %v", err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	hook()
	if first, _ := l.FirstIndex(); first != 16 {
		t.Fatalf("first %d want 16", first)
	}
	if term, err := l.Term(15); err != nil || term != 6 {
		t.Fatalf("term at truncation point: %d %v", term, err)
	}
	if _, err := l.Entries(10, 17, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries below truncation: %v", err)
	}
	l2, _, err := Open(eng, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := l2.FirstIndex(); first != 16 {
		t.Fatalf("after reopen first %d", first)
	}
	// Nothing to do when asked to truncate at or below the point.
	b = eng.NewBatch()
	defer b.Close()
	if hook, err := l.StageTruncate(b, 10); hook != nil || err != nil {
		t.Fatalf("second truncation at 10: %v %v", hook != nil, err)
	}
}

func TestSnapshotReplacesLog(t *testing.T) {
	eng, l := openTest(t)
	persist(t, eng, l, raftpb.HardState{Term: 6, Commit: 9}, ents(6, 6, 9))
	b := eng.NewBatch()
	snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 50, Term: 8, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
	hook := l.StageReady(b, raftpb.HardState{Term: 8, Commit: 50}, nil, snap)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	hook()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != 51 || last != 50 {
		t.Fatalf("after snapshot first %d last %d", first, last)
	}
	if term, _ := l.Term(50); term != 8 {
		t.Fatalf("term at snapshot index %d", term)
	}
}
