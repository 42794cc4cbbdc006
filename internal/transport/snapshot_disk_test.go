package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// listenHigh listens on 127.0.0.1 at a free port in 44000–45999.
func listenHigh(t *testing.T) net.Listener {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 44000+rand.IntN(2000)))
		if err == nil {
			return l
		}
	}
	t.Fatal("no free port in 44000–45999")
	return nil
}

// A zero reserve still refuses a filesystem with nothing left, a failed
// measure lets the snapshot in, and no DiskFree means no check.
func TestDiskRoomCheck(t *testing.T) {
	room := func(free uint64, err error, reserve uint64) *diskRoom {
		return &diskRoom{free: func() (uint64, error) { return free, err }, reserve: reserve, log: slog.Default()}
	}
	for _, c := range []struct {
		d        *diskRoom
		incoming int
		refused  bool
	}{
		{room(100, nil, 100), 0, false},
		{room(99, nil, 100), 0, true},
		{room(150, nil, 100), 50, false},
		{room(150, nil, 100), 51, true},
		{room(0, nil, 0), 0, true},
		{room(1, nil, 0), 1, false},
		{room(0, errors.New("statfs failed"), 100), 10, false},
		{&diskRoom{}, 1 << 30, false},
	} {
		if err := c.d.check(c.incoming); (err != nil) != c.refused || (err != nil && !errors.Is(err, ErrDiskReserve)) {
			t.Errorf("reserve %d, %d incoming: %v, want refused %v", c.d.reserve, c.incoming, err, c.refused)
		}
	}
}

// An incoming snapshot stream is refused at its start while the free
// space is below the disk reserve (the handler never sees it), cut as a
// chunk arrives once spilling that chunk would take the disk below the
// reserve (the handler sees ErrDiskReserve, so it discards what it
// staged), both with ResourceExhausted naming the disk reserve, and
// counted as refused; with room again the next snapshot goes through.
func TestGRPCSnapshotKeepsTheDiskReserve(t *testing.T) {
	const reserve, chunk = 1 << 20, 16 << 10
	var mu sync.Mutex
	var measures int
	// freeAt is the free space the i-th measure (from 1) of a phase finds.
	var freeAt func(i int) uint64
	diskFree := func() (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		measures++
		return freeAt(measures), nil
	}
	phase := func(f func(i int) uint64) {
		mu.Lock()
		measures, freeAt = 0, f
		mu.Unlock()
	}
	type outcome struct {
		chunks int
		data   []byte
		err    error
	}
	handled := make(chan outcome, 4)
	r2 := &recorder{got: make(chan struct{}, 1)}
	r2.snap = func(ctx context.Context, env Envelope, next func() ([]byte, error)) error {
		var o outcome
		for {
			b, err := next()
			if errors.Is(err, io.EOF) {
				handled <- o
				return nil
			}
			if err != nil {
				o.err = err
				handled <- o
				return err
			}
			o.chunks++
			o.data = append(o.data, b...)
		}
	}
	l1, l2 := listenHigh(t), listenHigh(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: &recorder{got: make(chan struct{}, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2, DiskFree: diskFree, DiskReserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap := func(index uint64) Envelope {
		return Envelope{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: index, Term: 1}}}}
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	refusedForDisk := func(err error, what string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "disk reserve") {
			t.Fatalf("%s: %v, want ResourceExhausted naming the disk reserve", what, err)
		}
	}

	// Below the reserve: refused before the handler sees anything.
	phase(func(int) uint64 { return reserve - 1 })
	refusedForDisk(t1.SendSnapshot(ctx, 2, snap(1), &chunked{data: data, n: chunk}), "a snapshot with the disk below its reserve")
	select {
	case o := <-handled:
		t.Fatalf("the handler received a snapshot refused at its start: %+v", o.chunks)
	default:
	}

	// Room for the start and three chunks, then only for the reserve
	// and less than a chunk more: the fourth chunk is refused.
	phase(func(i int) uint64 {
		if i <= 4 {
			return 10 << 20
		}
		return reserve + chunk - 1
	})
	refusedForDisk(t1.SendSnapshot(ctx, 2, snap(2), &chunked{data: data, n: chunk}), "a snapshot the disk ran out of room for")
	select {
	case o := <-handled:
		if o.chunks != 3 || !errors.Is(o.err, ErrDiskReserve) {
			t.Fatalf("the cut stream's handler got %d chunks and %v, want 3 and ErrDiskReserve", o.chunks, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut stream's handler never ended")
	}
	if got := t2.Stats().SnapshotsRefused; got != 2 {
		t.Fatalf("refused snapshots counted: %d, want 2", got)
	}

	// Room again: the sender's next try goes through, whole.
	phase(func(int) uint64 { return 10 << 20 })
	if err := t1.SendSnapshot(ctx, 2, snap(3), &chunked{data: data, n: chunk}); err != nil {
		t.Fatalf("a snapshot with room on the disk: %v", err)
	}
	o := <-handled
	if o.err != nil || !bytes.Equal(o.data, data) {
		t.Fatalf("the snapshot with room arrived as %d bytes, %v", len(o.data), o.err)
	}
	mu.Lock()
	if measures != 1+len(data)/chunk {
		t.Errorf("%d measures of the free space for a snapshot of %d chunks, want one at the start and one per chunk", measures, len(data)/chunk)
	}
	mu.Unlock()
	if got := t2.Stats().SnapshotsRefused; got != 2 {
		t.Fatalf("refused snapshots counted: %d, want still 2", got)
	}
}
