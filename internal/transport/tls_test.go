package transport

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// peerCA makes a CA and node certificates for ids; it returns each
// node's Files.
func peerCA(t *testing.T, ids ...uint64) map[uint64]security.Files {
	t.Helper()
	dir := t.TempDir()
	if _, err := security.InitCA(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := map[uint64]security.Files{}
	for _, id := range ids {
		p, err := security.IssueNode(dir, id, []string{"127.0.0.1"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out[id] = security.Files{Cert: p.Cert, Key: p.Key, CA: filepath.Join(dir, security.CACertFile)}
	}
	return out
}

// Two nodes of the cluster CA exchange raft messages, requests and
// snapshots over mutual TLS; a node whose certificate another CA signed
// reaches neither, and both sides count the refusals.
func TestGRPCMutualTLS(t *testing.T) {
	files := peerCA(t, 1, 2)
	files[3] = peerCA(t, 3)[3] // another CA
	ls := map[uint64]string{}
	lis := map[uint64]net.Listener{}
	for id := uint64(1); id <= 3; id++ {
		l := listen(t)
		ls[id], lis[id] = l.Addr().String(), l
	}
	trs := map[uint64]*GRPC{}
	recs := map[uint64]*recorder{}
	for id := uint64(1); id <= 3; id++ {
		srv, cli, err := security.PeerTLS(files[id])
		if err != nil {
			t.Fatal(err)
		}
		recs[id] = &recorder{got: make(chan struct{}, 1)}
		tr, err := NewGRPC(Config{NodeID: id, Listener: lis[id], Peers: ls, Handler: recs[id], ServerTLS: srv, ClientTLS: cli})
		if err != nil {
			t.Fatal(err)
		}
		trs[id] = tr
		t.Cleanup(func() { tr.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trs[1].Send(2, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 5}}})
	if envs := recs[2].wait(t, 1); envs[0].Msg.Term != 5 {
		t.Fatalf("got %+v", envs[0])
	}
	if resp, err := trs[2].Request(ctx, 1, &wire.Request{Kind: wire.KindRead, ShardID: 1, Key: []byte("k")}); err != nil || string(resp.Value) != "echo:k" {
		t.Fatalf("request over mTLS: %+v %v", resp, err)
	}
	if err := trs[1].SendSnapshot(ctx, 2, Envelope{ShardID: 2, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2,
		Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 9, Term: 1}}}}, &chunked{data: []byte("snap"), n: 2}); err != nil {
		t.Fatalf("snapshot over mTLS: %v", err)
	}

	// The foreign node: its raft messages, requests and snapshots never
	// arrive, and node 1 cannot reach it either.
	short, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	for i := 0; i < 3; i++ {
		trs[3].Send(1, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgVote, From: 3, To: 1, Term: 99}}})
	}
	if _, err := trs[3].Request(short, 1, &wire.Request{Kind: wire.KindRead, ShardID: 1, Key: []byte("x")}); err == nil {
		t.Fatal("a node of another CA made a request")
	}
	if err := trs[3].SendSnapshot(short, 1, Envelope{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 3, To: 1,
		Snapshot: &raftpb.Snapshot{}}}, &chunked{data: []byte("s"), n: 1}); err == nil {
		t.Fatal("a node of another CA sent a snapshot")
	}
	if _, err := trs[1].Request(short, 3, &wire.Request{Kind: wire.KindRead, ShardID: 1, Key: []byte("x")}); err == nil {
		t.Fatal("node 1 trusted a node of another CA")
	}
	recs[1].mu.Lock()
	for _, e := range recs[1].envs {
		if e.Msg.From == 3 {
			t.Fatalf("node 1 received from the foreign node: %+v", e)
		}
	}
	recs[1].mu.Unlock()
	if st := trs[1].Stats(); st.TLSRefused == 0 || st.TLSDialFailed == 0 {
		t.Fatalf("node 1 counted %d refused and %d failed dials, want both > 0", st.TLSRefused, st.TLSDialFailed)
	}
	if st := trs[3].Stats(); st.TLSDialFailed == 0 {
		t.Fatalf("the foreign node counted no failed dial: %+v", st)
	}
	if trs[3].Reachable(1) {
		t.Fatal("the foreign node sees node 1 reachable")
	}
}

func TestGRPCTLSConfigPairs(t *testing.T) {
	files := peerCA(t, 1)
	srv, _, err := security.PeerTLS(files[1])
	if err != nil {
		t.Fatal(err)
	}
	c := Config{NodeID: 1, ListenAddr: "127.0.0.1:0", Handler: &recorder{}, ServerTLS: srv}.EnsureDefaults()
	if err := c.Validate(); err == nil {
		t.Fatal("ServerTLS without ClientTLS accepted")
	}
}
