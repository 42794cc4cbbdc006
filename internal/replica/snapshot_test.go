package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openNode opens shard 1 (the whole ring, replicas 1, 2, 3) on node.
func openNode(t *testing.T, node uint64) *Replica {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}, Epoch: 1}
	r, err := Open(Config{NodeID: node, Desc: d, Engine: eng, Logger: quiet,
		Send: func(uint64, []raftpb.Message) {}, Enqueue: func(uint64) {}}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(); eng.Close() })
	return r
}

// fill writes n user keys of size bytes each and sets the applied state
// to index, as if the entries up to it had been applied.
func fill(t *testing.T, r *Replica, n, size int, index uint64, tag string) {
	t.Helper()
	b := r.cfg.Engine.NewBatch()
	val := make([]byte, size)
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("key-%06d", i))
		copy(val, tag)
		b.Set(storage.DataKey(shard.Token(k), k), storage.EncodeValue(uint64(i+1), val))
	}
	as := raftlog.AppliedState{Index: index, Term: 5, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	b.Set(storage.AppliedKey(1), as.Marshal())
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

// outgoingSnapshot is what raft does on the leader: ask for a snapshot.
func outgoingSnapshot(t *testing.T, r *Replica) raftpb.Message {
	t.Helper()
	r.mu.Lock()
	snap, err := r.snapshot()
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 6, Snapshot: &snap}
}

func readAll(t *testing.T, src *SnapshotSource) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
}

// receive runs ReceiveSnapshot on r with chunks (then fail, if set),
// driving r's rounds as the store's workers would.
func receive(t *testing.T, r *Replica, m raftpb.Message, chunks [][]byte, fail error) (bool, error) {
	t.Helper()
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		next := func() ([]byte, error) {
			if len(chunks) == 0 {
				if fail != nil {
					return nil, fail
				}
				return nil, io.EOF
			}
			b := chunks[0]
			chunks = chunks[1:]
			return b, nil
		}
		ok, err := r.ReceiveSnapshot(ctx, m, next)
		done <- result{ok, err}
	}()
	for {
		select {
		case res := <-done:
			r.Process()
			return res.ok, res.err
		case <-time.After(time.Millisecond):
			r.Process()
		}
	}
}

func stagingEmpty(t *testing.T, r *Replica) {
	t.Helper()
	left, err := os.ReadDir(r.cfg.Engine.StagingDir())
	if err != nil || len(left) != 0 {
		t.Fatalf("staging folder holds %d files (%v)", len(left), err)
	}
}

// A snapshot of several chunks is streamed from a pinned engine snapshot
// — one bounded chunk at a time, with the state at the snapshot's index
// even when writes follow — and installs intact on another replica.
func TestSnapshotStreamsInChunksAndInstallsIntact(t *testing.T) {
	src := openNode(t, 1)
	fill(t, src, 3000, 1000, 100, "before")
	_, want, err := src.Hash()
	if err != nil {
		t.Fatal(err)
	}
	m := outgoingSnapshot(t, src)
	if len(m.Snapshot.Data) > 16 || m.Snapshot.Metadata.Index != 100 {
		t.Fatalf("raft's snapshot carries %d bytes of data, index %d", len(m.Snapshot.Data), m.Snapshot.Metadata.Index)
	}
	// Writes after raft asked for the snapshot are not part of it.
	fill(t, src, 3500, 1000, 120, "after!")

	const chunk = 64 << 10
	s, err := src.OpenSnapshot(m, chunk)
	if err != nil {
		t.Fatal(err)
	}
	chunks := readAll(t, s)
	n, size, largest := s.Stats()
	s.Close()
	if n != len(chunks) || n < size/chunk || size < 3000*1000 {
		t.Fatalf("%d chunks (%d read), %d bytes", n, len(chunks), size)
	}
	// No chunk exceeds the chunk size by more than one record.
	if largest > chunk+1100 {
		t.Fatalf("largest chunk %d bytes, chunk size %d", largest, chunk)
	}
	if _, err := src.OpenSnapshot(m, chunk); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("a snapshot opened twice: %v", err)
	}

	dst := openNode(t, 2)
	ok, err := receive(t, dst, m, chunks, nil)
	if err != nil || !ok {
		t.Fatalf("receive: installed %v, %v", ok, err)
	}
	applied, got, err := dst.Hash()
	if err != nil || applied != 100 || got != want {
		t.Fatalf("installed state at %d hash %s, want 100 %s (%v)", applied, got, want, err)
	}
	if dst.Applied() != 100 {
		t.Fatalf("replica applied %d", dst.Applied())
	}
	if first, last := dst.LogBounds(); first != 101 || last != 100 {
		t.Fatalf("log bounds after the snapshot: %d..%d", first, last)
	}
	stagingEmpty(t, dst)
}

// A stream that breaks, carries a bad record, a key out of order or a key
// outside the shard installs nothing and leaves no file behind.
func TestSnapshotAbortedStreamInstallsNothing(t *testing.T) {
	src := openNode(t, 1)
	fill(t, src, 500, 1000, 100, "x")
	m := outgoingSnapshot(t, src)
	s, err := src.OpenSnapshot(m, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	chunks := readAll(t, s)
	s.Close()
	if len(chunks) < 4 {
		t.Fatalf("only %d chunks", len(chunks))
	}
	dst := openNode(t, 2)
	_, empty, _ := dst.Hash()
	k := []byte("key-000001")
	dk := storage.DataKey(shard.Token(k), k)
	cases := map[string]struct {
		chunks [][]byte
		fail   error
	}{
		"broken stream":  {chunks[:len(chunks)/2], errors.New("stream broken")},
		"bad record":     {append(append([][]byte(nil), chunks[:2]...), []byte{0x05, 'a'}), nil},
		"out of order":   {[][]byte{chunks[1], chunks[0]}, nil},
		"outside shard":  {[][]byte{appendRecord(nil, storage.AppliedKey(1), []byte("x"))}, nil},
		"duplicate keys": {[][]byte{appendRecord(appendRecord(nil, dk, nil), dk, nil)}, nil},
	}
	for name, c := range cases {
		ok, err := receive(t, dst, m, c.chunks, c.fail)
		if err == nil || ok {
			t.Fatalf("%s: installed %v, err %v", name, ok, err)
		}
		applied, h, _ := dst.Hash()
		if applied != raftlog.InitIndex || h != empty || dst.Applied() != raftlog.InitIndex {
			t.Fatalf("%s: state changed: applied %d hash %s", name, applied, h)
		}
		stagingEmpty(t, dst)
	}
}
