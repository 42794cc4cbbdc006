package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// listenInRange listens on 127.0.0.1 at a free port in 40000–41999.
func listenInRange(t *testing.T) net.Listener {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 40000+rand.IntN(2000)))
		if err == nil {
			return l
		}
	}
	t.Fatal("no free port in 40000–41999")
	return nil
}

// ends returns a channel that gets how the client stream s ends (the
// server's answer to it).
func ends(s grpc.ClientStream) <-chan error {
	c := make(chan error, 1)
	go func() {
		var ack frame
		c <- s.RecvMsg(&ack)
	}()
	return c
}

// An incoming snapshot stream whose sender goes quiet — after a chunk, or
// before its header — ends after SnapshotIdleTimeout with
// DeadlineExceeded, the handler sees ErrSnapshotIdle (so it discards what
// it staged), and the stream's slot is free again: while it was held (one
// slot) another snapshot was refused; afterwards one goes through.
func TestGRPCSnapshotIdleStreamFreesItsSlot(t *testing.T) {
	const idle = 300 * time.Millisecond
	l1, l2 := listenInRange(t), listenInRange(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	entered, proceed := make(chan struct{}), make(chan struct{})
	handlerErr := make(chan error, 4)
	r2 := &recorder{got: make(chan struct{}, 1)}
	r2.snap = func(ctx context.Context, env Envelope, next func() ([]byte, error)) error {
		stalled := env.Msg.Snapshot.Metadata.Index == 1
		for i := 0; ; i++ {
			if stalled && i == 1 {
				// The first chunk arrived: hold the slot until the
				// test has seen another snapshot refused.
				entered <- struct{}{}
				<-proceed
			}
			_, err := next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				handlerErr <- err
				return err
			}
		}
	}
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: &recorder{got: make(chan struct{}, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2,
		MaxIncomingSnapshots: 1, SnapshotIdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	snap := func(index uint64) Envelope {
		return Envelope{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: index, Term: 1}}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn := rawConn(t, t2.Addr())

	// A sender that sends its header and one chunk, then nothing.
	stalled, err := conn.NewStream(ctx, &serviceDesc.Streams[1], "/cairn.Peer/Snapshot")
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.SendMsg(&frame{b: EncodeBatch([]Envelope{snap(1)})}); err != nil {
		t.Fatal(err)
	}
	if err := stalled.SendMsg(&frame{b: []byte("one chunk")}); err != nil {
		t.Fatal(err)
	}
	end := ends(stalled)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled stream's first chunk never reached the handler")
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	err = t1.SendSnapshot(sctx, 2, snap(2), &chunked{data: make([]byte, 10), n: 10})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a snapshot while the only slot is held: %v, want ResourceExhausted", err)
	}
	// The clock starts before the handler is let go: once it is, it may
	// ask for the next chunk (starting the idle bound) before this
	// goroutine runs again, and a clock started after that would read
	// less than the bound.
	start := time.Now()
	close(proceed)
	select {
	case err := <-end:
		if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "idle") {
			t.Fatalf("the stalled stream ended with %v, want DeadlineExceeded naming the idle bound", err)
		}
		if d := time.Since(start); d < idle/2 {
			t.Fatalf("the stalled stream ended %v after its last chunk, before the idle bound %v", d, idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a stream idle for 5 s (SnapshotIdleTimeout %v) still holds its slot", idle)
	}
	if err := <-handlerErr; !errors.Is(err, ErrSnapshotIdle) {
		t.Fatalf("the handler saw %v, want ErrSnapshotIdle", err)
	}

	// A sender that opens a stream and sends nothing, not even a header.
	silent, err := conn.NewStream(ctx, &serviceDesc.Streams[1], "/cairn.Peer/Snapshot")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ends(silent):
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("the silent stream ended with %v, want DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a stream silent for 5 s (SnapshotIdleTimeout %v) still holds its slot", idle)
	}

	// The slot is free again.
	if err := t1.SendSnapshot(sctx, 2, snap(3), &chunked{data: make([]byte, 64<<10), n: 16 << 10}); err != nil {
		t.Fatalf("a snapshot after the idle streams ended: %v", err)
	}
	if got := t2.Stats().SnapshotsRefused; got != 3 {
		t.Fatalf("refused snapshots counted: %d, want 3 (one over the slots, two idle)", got)
	}
}
