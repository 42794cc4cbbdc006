package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// A node learns a newcomer's address at run time, follows it when it
// moves, and forgets it when removed.
func TestGRPCAddressBook(t *testing.T) {
	t1, _, _, _ := pair(t)
	l3 := listen(t)
	r3 := &recorder{got: make(chan struct{}, 1)}
	t3, err := NewGRPC(Config{NodeID: 3, Listener: l3, Handler: r3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t3.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := t1.Request(ctx, 3, &wire.Request{Kind: wire.KindNodeInfo}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("request to a node not in the book: %v, want ErrUnknownPeer", err)
	}
	if err := t1.SetPeer(3, l3.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t1.Send(3, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 3, Index: 7}}})
	if envs := r3.wait(t, 1); envs[0].Msg.Index != 7 {
		t.Fatalf("got %+v", envs)
	}
	if got := t1.PeerAddrs()[3]; got != l3.Addr().String() {
		t.Fatalf("address book has %q for node 3", got)
	}
	// The node moves to another address: a new transport listens there.
	t3.Close()
	l4 := listen(t)
	r4 := &recorder{got: make(chan struct{}, 1)}
	t4, err := NewGRPC(Config{NodeID: 3, Listener: l4, Handler: r4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { t4.Close() })
	if err := t1.SetPeer(3, l4.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t1.Send(3, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 3, Index: 8}}})
	if envs := r4.wait(t, 1); envs[0].Msg.Index != 8 {
		t.Fatalf("got %+v", envs)
	}
	t1.RemovePeer(3)
	if _, err := t1.Request(ctx, 3, &wire.Request{Kind: wire.KindNodeInfo}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("request to a removed node: %v, want ErrUnknownPeer", err)
	}
	if t1.Reachable(3) {
		t.Fatal("a removed node is reachable")
	}
}
