package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

type recorder struct {
	mu   sync.Mutex
	envs []Envelope
	got  chan struct{}
	// chunks and maxChunk: snapshot frames received, and the largest.
	chunks, maxChunk int
	// snap, if set, handles snapshots instead.
	snap func(ctx context.Context, env Envelope, next func() ([]byte, error)) error
}

// chunked is a SnapshotReader over data in chunks of n bytes.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Next() ([]byte, error) {
	if len(c.data) == 0 {
		return nil, io.EOF
	}
	k := min(c.n, len(c.data))
	b := c.data[:k:k]
	c.data = c.data[k:]
	return b, nil
}

func (r *recorder) HandleRaft(envs []Envelope) {
	r.mu.Lock()
	r.envs = append(r.envs, envs...)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func (r *recorder) HandleSnapshot(ctx context.Context, env Envelope, next func() ([]byte, error)) error {
	if r.snap != nil {
		return r.snap(ctx, env, next)
	}
	var data []byte
	for {
		b, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.chunks++
		r.maxChunk = max(r.maxChunk, len(b))
		r.mu.Unlock()
		data = append(data, b...)
	}
	env.Msg.Snapshot.Data = data
	r.HandleRaft([]Envelope{env})
	return nil
}

func (r *recorder) HandleRequest(_ context.Context, req *wire.Request) *wire.Response {
	return &wire.Response{Status: wire.StatusOK, Value: append([]byte("echo:"), req.Key...), Index: req.ShardID}
}

func (r *recorder) wait(t *testing.T, n int) []Envelope {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		if len(r.envs) >= n {
			out := append([]Envelope(nil), r.envs...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("received fewer than %d envelopes", n)
		}
	}
}

func listen(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func pair(t *testing.T) (*GRPC, *recorder, *GRPC, *recorder) {
	l1, l2 := listen(t), listen(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	r1, r2 := &recorder{got: make(chan struct{}, 1)}, &recorder{got: make(chan struct{}, 1)}
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: r1})
	if err != nil {
		t.Fatal(err)
	}
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t1.Close(); t2.Close() })
	return t1, r1, t2, r2
}

func TestGRPCBatchesArriveInOrder(t *testing.T) {
	t1, _, _, r2 := pair(t)
	for i := uint64(1); i <= 100; i++ {
		t1.Send(2, []Envelope{{ShardID: i % 7, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Index: i}}})
	}
	envs := r2.wait(t, 100)
	for i, e := range envs {
		if e.Msg.Index != uint64(i+1) || e.ShardID != uint64(i+1)%7 {
			t.Fatalf("envelope %d: shard %d index %d", i, e.ShardID, e.Msg.Index)
		}
	}
}

func TestGRPCRequestAndSnapshot(t *testing.T) {
	t1, _, _, r2 := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := t1.Request(ctx, 2, &wire.Request{Kind: wire.KindRead, ShardID: 9, Key: []byte("k")})
	if err != nil || string(resp.Value) != "echo:k" || resp.Index != 9 {
		t.Fatalf("request: %+v %v", resp, err)
	}
	data := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: several chunks
	snap := raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{
		Data: data, Metadata: raftpb.SnapshotMetadata{Index: 77, Term: 3}}}
	if err := t1.SendSnapshot(ctx, 2, Envelope{ShardID: 4, Msg: snap}, &chunked{data: data, n: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	envs := r2.wait(t, 1)
	r2.mu.Lock()
	chunks, maxChunk := r2.chunks, r2.maxChunk
	r2.mu.Unlock()
	// Streamed as the reader cut it: 46 frames of at most 64 KiB.
	if chunks != (len(data)+(64<<10)-1)/(64<<10) || maxChunk > 64<<10 {
		t.Fatalf("snapshot arrived in %d chunks, largest %d bytes", chunks, maxChunk)
	}
	got := envs[0].Msg
	if envs[0].ShardID != 4 || got.Snapshot.Metadata.Index != 77 || !bytes.Equal(got.Snapshot.Data, data) {
		t.Fatalf("snapshot arrived wrong: shard %d index %d %d bytes", envs[0].ShardID, got.Snapshot.Metadata.Index, len(got.Snapshot.Data))
	}
}

func TestGRPCUnreachablePeerIsReported(t *testing.T) {
	l := listen(t)
	dead := listen(t)
	deadAddr := dead.Addr().String()
	dead.Close()
	reported := make(chan uint64, 16)
	tr, err := NewGRPC(Config{NodeID: 1, Listener: l, Peers: map[uint64]string{1: l.Addr().String(), 2: deadAddr},
		Handler: &recorder{got: make(chan struct{}, 1)},
		Unreachable: func(to uint64, ids []uint64) {
			for _, id := range ids {
				reported <- id
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Send(2, []Envelope{{ShardID: 5, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, To: 2}}})
	select {
	case id := <-reported:
		if id != 5 {
			t.Fatalf("reported shard %d", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("unreachable peer never reported")
	}
	if tr.Reachable(2) {
		t.Fatal("dead peer still marked reachable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := tr.Request(ctx, 2, &wire.Request{Kind: wire.KindRead, ShardID: 1}); err == nil {
		t.Fatal("request to a dead peer succeeded")
	}
}

func TestBatchCodecRejectsGarbage(t *testing.T) {
	b := EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgVote, Term: 4}}})
	for i := 0; i < len(b); i++ {
		if _, err := DecodeBatch(b[:i]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
	if _, err := DecodeBatch(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
