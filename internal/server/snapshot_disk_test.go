package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/transport"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// noHandler is a peer that only sends.
type noHandler struct{ transport.Handler }

// The disk-full fault makes the node refuse incoming snapshots too, as
// the disk reserve reached would: ResourceExhausted naming the reserve.
// Healed, the node takes the stream to its store again (which drops this
// one: the sender holds no replica of the shard).
func TestDiskFullNodeRefusesSnapshots(t *testing.T) {
	s := oneNode(t)
	var l net.Listener
	var err error
	for range 100 {
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 44000+rand.IntN(2000))); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	peer, err := transport.NewGRPC(transport.Config{NodeID: 2, Listener: l, Handler: noHandler{},
		Peers:  map[uint64]string{1: s.tr.Addr(), 2: l.Addr().String()},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	var shardID uint64
	for _, r := range s.store.Replicas() {
		shardID = r.ID()
	}
	send := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		env := transport.Envelope{ShardID: shardID, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 100,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1000, Term: 100}}}}
		return peer.SendSnapshot(ctx, 1, env, &oneChunk{b: []byte("\x01k\x01v")})
	}
	faults{s}.DiskFull(true)
	err = send()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "disk reserve") {
		t.Fatalf("a snapshot to a node whose disk is full (injected): %v, want ResourceExhausted naming the disk reserve", err)
	}
	if got := s.tr.Stats().SnapshotsRefused; got != 1 {
		t.Fatalf("refused snapshots counted: %d, want 1", got)
	}
	faults{s}.DiskFull(false)
	if err := send(); status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("a snapshot after healing: %v, want the store's refusal", err)
	}
}

// oneChunk is a transport.SnapshotReader of one chunk.
type oneChunk struct{ b []byte }

func (o *oneChunk) Next() ([]byte, error) {
	if o.b == nil {
		return nil, io.EOF
	}
	b := o.b
	o.b = nil
	return b, nil
}
