package transport

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rawConn is a client to a peer server that sends whatever bytes it is
// given, as a forger would.
func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// sendRaw sends frames on one Raft stream and returns how it ended.
func sendRaw(t *testing.T, conn *grpc.ClientConn, frames ...[]byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := conn.NewStream(ctx, &serviceDesc.Streams[0], "/cairn.Peer/Raft")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := s.SendMsg(&frame{b: f}); err != nil {
			break
		}
	}
	s.CloseSend()
	var ack frame
	return s.RecvMsg(&ack)
}

type panicky struct{ recorder }

func (p *panicky) HandleRaft([]Envelope) { panic("handler bug") }

// Garbage frames and a handler that panics close the stream and are
// counted; the server keeps serving.
func TestGRPCSurvivesGarbageAndPanics(t *testing.T) {
	l := listen(t)
	h := &panicky{recorder{got: make(chan struct{}, 1)}}
	tr, err := NewGRPC(Config{NodeID: 1, Listener: l, Peers: map[uint64]string{1: l.Addr().String()}, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	conn := rawConn(t, tr.Addr())
	// A batch header claiming 2^40 envelopes in a 6-byte frame.
	if err := sendRaw(t, conn, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x20}); err == nil {
		t.Fatal("garbage frame accepted")
	}
	if got := tr.Stats().BadFrames; got != 1 {
		t.Fatalf("bad frames counted: %d", got)
	}
	ok := EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 1}}})
	if err := sendRaw(t, conn, ok); err == nil {
		t.Fatal("stream survived a handler panic")
	}
	if got := tr.Stats().Panics; got != 1 {
		t.Fatalf("panics counted: %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out frame
	req := &wire.Request{Kind: wire.KindRead, ShardID: 1, Key: []byte("k")}
	if err := conn.Invoke(ctx, "/cairn.Peer/Request", &frame{b: req.Marshal()}, &out); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

// One stream is cut beyond MaxSnapshotBytes, and streams beyond
// MaxIncomingSnapshots are refused while the others run.
func TestGRPCSnapshotBounds(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	var handlerErr = make(chan error, 4)
	r2 := &recorder{got: make(chan struct{}, 1)}
	r2.snap = func(ctx context.Context, env Envelope, next func() ([]byte, error)) error {
		if env.Msg.Snapshot.Metadata.Index == 1 {
			entered <- struct{}{}
			<-release
			return nil
		}
		for {
			_, err := next()
			if errors.Is(err, io.EOF) {
				handlerErr <- nil
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
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2, MaxSnapshotBytes: 100 << 10, MaxIncomingSnapshots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap := func(index uint64) Envelope {
		return Envelope{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: index, Term: 1}}}}
	}
	first := make(chan error, 1)
	go func() { first <- t1.SendSnapshot(ctx, 2, snap(1), &chunked{}) }()
	<-entered
	if err := t1.SendSnapshot(ctx, 2, snap(2), &chunked{data: make([]byte, 10), n: 10}); err == nil {
		t.Fatal("a second concurrent snapshot was accepted with MaxIncomingSnapshots 1")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := t1.SendSnapshot(ctx, 2, snap(3), &chunked{data: make([]byte, 1<<20), n: 32 << 10}); err == nil {
		t.Fatal("a snapshot over MaxSnapshotBytes was accepted")
	}
	if err := <-handlerErr; !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("handler saw %v, want ErrSnapshotTooLarge", err)
	}
	if got := t2.Stats().SnapshotsRefused; got != 2 {
		t.Fatalf("refused snapshots counted: %d", got)
	}
}
