package transport

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// With peer TLS a node's certificate names the node ("node-N"), and what
// arrives on its connections must come from it: one node's key must not
// let it speak (append, vote, snapshot, request) as another node.
func TestSenderBoundToCertificate(t *testing.T) {
	files := peerCA(t, 1, 2, 3)
	srv3, cli3, err := security.PeerTLS(files[3])
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{got: make(chan struct{}, 16)}
	tr3, err := NewGRPC(Config{NodeID: 3, Listener: listen(t), Handler: rec, ServerTLS: srv3, ClientTLS: cli3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr3.Close() })

	// The raft stream: node 2 sends an append claiming node 1 (the
	// leader) sent it, then a message of its own.
	_, cli2, err := security.PeerTLS(files[2])
	if err != nil {
		t.Fatal(err)
	}
	cli2 = cli2.Clone()
	cli2.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", tr3.Addr(), cli2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	forged := rawFrame(EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{
		Type: raftpb.MsgApp, From: 1, To: 3, Term: 7, Index: 10, LogTerm: 7, Commit: 11,
		Entries: []raftpb.Entry{{Term: 7, Index: 11, Data: []byte("forged by node 2")}}}}}))
	genuine := rawFrame(EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeatResp, From: 2, To: 3, Term: 7}}}))
	if _, err := c.Write(append(append([]byte(rawMagic), forged...), genuine...)); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, 1)
	for _, e := range got {
		if e.Msg.From != 2 {
			t.Fatalf("node 3 accepted a %v from %d on a connection of node-2", e.Msg.Type, e.Msg.From)
		}
	}
	if n := tr3.Stats().WrongSender; n != 1 {
		t.Fatalf("WrongSender %d, want 1", n)
	}

	// A request over gRPC naming another sender is refused; its own goes
	// through.
	srv2, _, err := security.PeerTLS(files[2])
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := NewGRPC(Config{NodeID: 2, Listener: listen(t), Handler: &recorder{}, ServerTLS: srv2, ClientTLS: cli2,
		Peers: map[uint64]string{3: tr3.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr2.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr2.Request(ctx, 3, &wire.Request{Kind: wire.KindRead, Sender: 1, ShardID: 9, Key: []byte("k")})
	if err != nil || resp.Status != wire.StatusInvalid {
		t.Fatalf("a request of node 2 claiming sender 1: %+v %v, want refused", resp, err)
	}
	resp, err = tr2.Request(ctx, 3, &wire.Request{Kind: wire.KindRead, Sender: 2, ShardID: 9, Key: []byte("k")})
	if err != nil || resp.Status != wire.StatusOK {
		t.Fatalf("a request of node 2 as itself: %+v %v", resp, err)
	}
	if n := tr3.Stats().WrongSender; n != 2 {
		t.Fatalf("WrongSender %d, want 2", n)
	}
}
