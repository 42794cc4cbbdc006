package cluster

import (
	"context"
	"errors"
	"testing"
)

// A node restarting with new addresses may not take another member's:
// peers would send that member's raft traffic to it, and clients would
// reach the wrong node. SetAddrs refuses it as Join does (ErrAddrInUse),
// and leaves the record as it was.
func TestSetAddrsRefusesAnotherMembersAddress(t *testing.T) {
	r := Bootstrap(three) // peers h:1, h:2, h:3; no HTTP address yet
	var err error
	for id, h := range map[uint64]string{1: "c:1", 2: "c:2", 3: "c:3"} {
		// Members of the initial cluster have no HTTP address yet: two
		// empty ones are no conflict.
		if r, _, err = r.SetAddrs(id, h, ""); err != nil {
			t.Fatalf("node %d tells its HTTP address: %v", id, err)
		}
	}
	for _, c := range []struct {
		http, peer string
		want       error
	}{
		{"c:2", "h:1", ErrAddrInUse}, // node 2's HTTP address
		{"c:1", "h:3", ErrAddrInUse}, // node 3's peer address
		{"c:2", "", ErrAddrInUse},    // peer address unspecified, HTTP taken
		{"c:3", "h:2", ErrAddrInUse}, // both taken
		{"c:1", "h:1", nil},          // its own: unchanged
		{"c:9", "h:9", nil},          // free addresses
	} {
		out, _, err := r.SetAddrs(1, c.http, c.peer)
		if !errors.Is(err, c.want) {
			t.Errorf("node 1 to http %s peer %s: %v, want %v", c.http, c.peer, err, c.want)
		}
		if err != nil {
			if m, _ := out.Member(1); m.HTTPAddr != "c:1" || m.PeerAddr != "h:1" {
				t.Errorf("node 1 to http %s peer %s: refused, yet the record has it at %s, %s", c.http, c.peer, m.HTTPAddr, m.PeerAddr)
			}
			continue
		}
		if m, _ := out.Member(1); c.want == nil && (m.HTTPAddr != c.http || m.PeerAddr != c.peer) {
			t.Errorf("node 1 to http %s peer %s: the record has %s, %s", c.http, c.peer, m.HTTPAddr, m.PeerAddr)
		}
	}
	// A dead member's addresses are free, as for a join.
	if r, _, err = r.MarkDead(3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.SetAddrs(1, "c:3", "h:3"); err != nil {
		t.Fatalf("node 1 to a dead node's addresses: %v", err)
	}
}

// The start of a node (Manager.Register) reports the refusal and writes
// nothing.
func TestRegisterRefusesAnotherMembersAddress(t *testing.T) {
	kv := newMemKV()
	m := newTestManager(t, 1, kv)
	ctx := context.Background()
	if _, err := m.Bootstrap(ctx, three); err != nil {
		t.Fatal(err)
	}
	two := newTestManager(t, 2, kv)
	if _, err := two.Register(ctx, "c:2", "h:2"); err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	before := kv.next
	kv.mu.Unlock()
	_, err := m.Register(ctx, "c:2", "h:1")
	if !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("node 1 registering at node 2's HTTP address: %v, want ErrAddrInUse", err)
	}
	kv.mu.Lock()
	after := kv.next
	kv.mu.Unlock()
	if after != before {
		t.Fatal("a refused registration wrote the record")
	}
	rec, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if one, _ := rec.Member(1); one.HTTPAddr == "c:2" {
		t.Fatalf("node 1 holds node 2's HTTP address in the record: %+v", rec.Members)
	}
}
