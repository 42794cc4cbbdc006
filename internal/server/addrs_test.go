package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/cluster"
)

// node1At starts node 1 of a one-node cluster on dir at the given HTTP
// address (peer address 127.0.0.1:44102).
func node1At(t *testing.T, dir, httpAddr string) *Server {
	t.Helper()
	s, err := New(Config{NodeID: 1, DataDir: dir, HTTPAddr: httpAddr, PeerAddr: "127.0.0.1:44102",
		InitialCluster: map[uint64]string{1: "127.0.0.1:44102"}, Replication: 1, Shards: 1,
		TickInterval: 10 * time.Millisecond, MembersPoll: 50 * time.Millisecond, DeadNodeTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	return s
}

// A node restarted with --http-addr set to another member's address is
// refused by the cluster (409 address_in_use for a join): its start
// reports the refusal, cairn serve exits with it, and the record keeps
// the node at the address it had. Before, the record took the new
// address and clients listing the members reached this node for the
// other one.
func TestRestartOnAnotherMembersAddressIsRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := node1At(t, dir, "127.0.0.1:44101")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if rec, ok := s.members.Cached(); ok {
			if m, _ := rec.Member(1); m.HTTPAddr == "127.0.0.1:44101" {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = s.Stop(ctx)
			t.Fatal("node 1 did not record its HTTP address within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Node 2 joins (it need not run: only its addresses matter here).
	if _, err := s.members.Join(ctx, cluster.JoinRequest{NodeID: 2, HTTPAddr: "127.0.0.1:44103", PeerAddr: "127.0.0.1:44104"}); err != nil {
		_ = s.Stop(ctx)
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	s = node1At(t, dir, "127.0.0.1:44103") // node 2's HTTP address
	defer func() { _ = s.Stop(ctx) }()
	select {
	case err := <-s.Refused():
		if !errors.Is(err, cluster.ErrAddrInUse) || !strings.Contains(err.Error(), "node 2") || !strings.Contains(err.Error(), "127.0.0.1:44103") {
			t.Fatalf("refusal %q: want ErrAddrInUse naming node 2 and 127.0.0.1:44103", err)
		}
	case <-time.After(20 * time.Second):
		rec, err := s.members.Read(ctx)
		m1, _ := rec.Member(1)
		t.Fatalf("no refusal within 20 s; the record has node 1 at http %s (node 2's is 127.0.0.1:44103; read err %v)", m1.HTTPAddr, err)
	}
	rec, err := s.members.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m1, _ := rec.Member(1); m1.HTTPAddr != "127.0.0.1:44101" {
		t.Fatalf("after the refusal the record has node 1 at http %s, want 127.0.0.1:44101", m1.HTTPAddr)
	}
}
