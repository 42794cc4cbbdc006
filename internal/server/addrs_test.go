package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/cluster"
)

// freeAddrs returns n distinct addresses of 127.0.0.1 at ports in
// 46000–46999 that were free a moment ago. The test needs addresses it
// knows before a node binds them, and binds one again after a restart;
// fixed ports (it used 44101–44104) could be held by another package's
// test running at the same time (several pick theirs at random in
// 44000–45999), and the node then failed to start.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for tries := 0; len(addrs) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free ports in 46000–46999", n)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 46000+rand.IntN(1000)))
		if err != nil {
			continue
		}
		defer l.Close() // held until all are picked, so none repeats
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// node1At starts node 1 of a one-node cluster on dir at the given HTTP
// and peer addresses.
func node1At(t *testing.T, dir, httpAddr, peerAddr string) *Server {
	t.Helper()
	s, err := New(Config{NodeID: 1, DataDir: dir, HTTPAddr: httpAddr, PeerAddr: peerAddr,
		InitialCluster: map[uint64]string{1: peerAddr}, Replication: 1, Shards: 1,
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
	// Node 1's HTTP and peer addresses, and node 2's.
	addrs := freeAddrs(t, 4)
	http1, peer1, http2, peer2 := addrs[0], addrs[1], addrs[2], addrs[3]
	s := node1At(t, dir, http1, peer1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if rec, ok := s.members.Cached(); ok {
			if m, _ := rec.Member(1); m.HTTPAddr == http1 {
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
	if _, err := s.members.Join(ctx, cluster.JoinRequest{NodeID: 2, HTTPAddr: http2, PeerAddr: peer2}); err != nil {
		_ = s.Stop(ctx)
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	s = node1At(t, dir, http2, peer1) // node 2's HTTP address
	defer func() { _ = s.Stop(ctx) }()
	select {
	case err := <-s.Refused():
		if !errors.Is(err, cluster.ErrAddrInUse) || !strings.Contains(err.Error(), "node 2") || !strings.Contains(err.Error(), http2) {
			t.Fatalf("refusal %q: want ErrAddrInUse naming node 2 and %s", err, http2)
		}
	case <-time.After(20 * time.Second):
		rec, err := s.members.Read(ctx)
		m1, _ := rec.Member(1)
		t.Fatalf("no refusal within 20 s; the record has node 1 at http %s (node 2's is %s; read err %v)", m1.HTTPAddr, http2, err)
	}
	rec, err := s.members.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m1, _ := rec.Member(1); m1.HTTPAddr != http1 {
		t.Fatalf("after the refusal the record has node 1 at http %s, want %s", m1.HTTPAddr, http1)
	}
}
