package etcdapi

import (
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// setClock sets the fake's shard clock.
func setClock(f *fakeBackend, c time.Duration) {
	f.mu.Lock()
	f.clock = c
	f.mu.Unlock()
}

func exists(f *fakeBackend, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.data[key]
	return ok
}

func TestLeaseExpiryByShardClock(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 1})
	if err != nil || g.ID <= 0 || g.TTL != minLeaseTTL {
		t.Fatalf("grant: %v %v, want a lease of the minimum TTL", g, err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("1"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	f.set("b", "rewritten without the lease")
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("c"), Value: []byte("1"), Lease: g.ID + 1}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("put with an unknown lease: %v", err)
	}
	ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID, Keys: true})
	// b, rewritten without the lease, is no longer attached to it.
	if err != nil || ttl.GrantedTTL != 2 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "a" {
		t.Fatalf("time to live: %v %v, want key a only", ttl, err)
	}
	seen := map[int64]leaseSeen{}
	setClock(f, 10*time.Second)
	s.expireOnce(seen) // first sight: the countdown starts at 10 s
	setClock(f, 11900*time.Millisecond)
	s.expireOnce(seen)
	if !exists(f, "a") || f.stamps == 0 {
		t.Fatalf("expired before its TTL of shard clock (a exists %v), or the clock was not kept moving (%d stamps)", exists(f, "a"), f.stamps)
	}
	// A renewal restarts the countdown.
	if ttl, err := s.renew(ctx, g.ID); err != nil || ttl != 2 {
		t.Fatalf("renew: %d %v", ttl, err)
	}
	s.expireOnce(seen)
	setClock(f, 13*time.Second)
	s.expireOnce(seen)
	if !exists(f, "a") {
		t.Fatal("expired 1.1 s after a renewal")
	}
	setClock(f, 14*time.Second)
	s.expireOnce(seen)
	if exists(f, "a") || !exists(f, "b") {
		t.Fatalf("after expiry: a exists %v (want deleted), b exists %v (rewritten since: kept)", exists(f, "a"), exists(f, "b"))
	}
	if ttl, _ := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID}); ttl.TTL != -1 {
		t.Fatalf("time to live of an expired lease: %v", ttl)
	}
	if ttl, err := s.renew(ctx, g.ID); err != nil || ttl != 0 {
		t.Fatalf("keepalive of an expired lease: %d %v, want TTL 0", ttl, err)
	}
}

func TestLeaseRevokeAndList(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60, ID: 42})
	if err != nil || g.ID != 42 || g.TTL != 60 {
		t.Fatalf("grant: %v %v", g, err)
	}
	if _, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60, ID: 42}); err != rpctypes.ErrGRPCLeaseExist {
		t.Fatalf("second grant of 42: %v", err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: 42}); err != nil {
		t.Fatal(err)
	}
	ls, err := l.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil || len(ls.Leases) != 1 || ls.Leases[0].ID != 42 {
		t.Fatalf("leases: %v %v", ls, err)
	}
	// Ranges never show the lease records.
	if got, _ := k.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}); got.Count != 1 {
		t.Fatalf("range over everything: %v, want the one user key", got)
	}
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 42}); err != nil {
		t.Fatal(err)
	}
	if exists(f, "a") {
		t.Fatal("revoke left the lease's key")
	}
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 42}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("second revoke: %v", err)
	}
}

// A keepalive racing an expiry: the expiry's decision is one write (the
// record marked revoking, on condition that it is unchanged), so a
// keepalive that lands before it keeps the lease and its keys, and one
// that lands after it is answered TTL 0 (the lease is gone) while the
// keys are deleted. Never a live lease without its keys.
func TestKeepAliveRacingExpiry(t *testing.T) {
	for _, after := range []int{0, 1} {
		s, f := newTestServer(t)
		l, k := &leaseServer{s: s}, &kvServer{s: s}
		g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("lock"), Value: []byte("me"), Lease: g.ID}); err != nil {
			t.Fatal(err)
		}
		seen := map[int64]leaseSeen{}
		setClock(f, 10*time.Second)
		s.expireOnce(seen) // the countdown starts
		setClock(f, 13*time.Second)
		var kaTTL int64
		var kaErr error
		keepalive := func(*fakeBackend) { kaTTL, kaErr = s.renew(ctx, g.ID) }
		if after == 0 {
			f.beforeWrite = keepalive // before the expiry's first write
		} else {
			f.beforeWrite = func(*fakeBackend) { f.beforeWrite = keepalive } // before its second
		}
		s.expireOnce(seen)
		if kaErr != nil {
			t.Fatal(kaErr)
		}
		ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID, Keys: true})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case after == 0 && (kaTTL != 2 || ttl.TTL <= 0 || !exists(f, "lock")):
			t.Errorf("keepalive before the expiry's decision: answered TTL %d, lease TTL %d, key exists %v; want the lease and its key kept",
				kaTTL, ttl.TTL, exists(f, "lock"))
		case after == 1 && (kaTTL != 0 || ttl.TTL != -1 || exists(f, "lock")):
			t.Errorf("keepalive after the expiry's decision: answered TTL %d, lease TTL %d, key exists %v; want TTL 0, the lease and its key gone",
				kaTTL, ttl.TTL, exists(f, "lock"))
		}
	}
}

// A revocation a node left half done (the record marked revoking, keys
// not yet deleted) is invisible to clients and finished by the next
// expiry pass at once, whatever the lease's TTL.
func TestHalfDoneRevocationIsFinished(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.updateLease(ctx, g.ID, func(r *leaseRecord) error { r.Revoking = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if ttl, err := s.renew(ctx, g.ID); err != nil || ttl != 0 {
		t.Fatalf("keepalive of a lease being revoked: TTL %d %v, want 0", ttl, err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("1"), Lease: g.ID}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("put attaching to a lease being revoked: %v, want %v", err, rpctypes.ErrGRPCLeaseNotFound)
	}
	if ls, err := l.LeaseLeases(ctx, &pb.LeaseLeasesRequest{}); err != nil || len(ls.Leases) != 0 {
		t.Fatalf("leases: %v %v, want none", ls, err)
	}
	if !exists(f, "a") || !exists(f, string(leaseKey(g.ID))) {
		t.Fatal("the half-done revocation's key or record is missing before the expiry pass")
	}
	s.expireOnce(map[int64]leaseSeen{})
	if exists(f, "a") || exists(f, string(leaseKey(g.ID))) {
		t.Fatalf("after an expiry pass: key a exists %v, record exists %v; want both gone", exists(f, "a"), exists(f, string(leaseKey(g.ID))))
	}
}

// LeaseTimeToLive with keys lists the keys still attached: not one deleted
// since or rewritten without the lease (etcd detaches those).
func TestTimeToLiveListsAttachedKeysOnly(t *testing.T) {
	s, _ := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"kept", "deleted", "rewritten"} {
		if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: g.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("deleted")}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("rewritten"), Value: []byte("no lease")}); err != nil {
		t.Fatal(err)
	}
	ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID, Keys: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ttl.Keys) != 1 {
		t.Fatalf("TimeToLive keys %q, want only %q (the others were deleted or detached)", ttl.Keys, "kept")
	}
}

// A long-lived lease (a clientv3 concurrency.Session taking locks under
// many names, say) that has put and deleted more than maxLeaseKeys
// distinct keys takes more: the record forgets keys no longer attached,
// and stays short.
func TestLeaseKeyLimitCountsAttachedKeys(t *testing.T) {
	s, _ := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxLeaseKeys + 1 {
		key := []byte(fmt.Sprintf("lock/job-%05d", i))
		if _, err := k.Put(ctx, &pb.PutRequest{Key: key, Value: []byte("held"), Lease: g.ID}); err != nil {
			t.Fatalf("lock %d (every earlier one released): %v", i, err)
		}
		if _, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	rec, _, _, err := s.readLease(ctx, g.ID)
	if err != nil || len(rec.Keys) > 2*pruneAt {
		t.Fatalf("the record lists %d keys (%v), want at most %d", len(rec.Keys), err, 2*pruneAt)
	}
}

// A lease revoked and granted again under the same id between two expiry
// checks is a new lease: its countdown starts at its grant, not at the
// first sight of the lease it replaced.
func TestLeaseGrantedAgainUnderItsIDStartsAfresh(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	const id = 100
	if _, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: 60}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]leaseSeen{}
	setClock(f, 10*time.Second)
	s.expireOnce(seen) // the first lease's countdown starts at 10 s
	setClock(f, 40*time.Second)
	s.expireOnce(seen)
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: id}); err != nil {
		t.Fatal(err)
	}
	setClock(f, 41*time.Second)
	s.expireOnce(seen)
	if !exists(f, "a") {
		t.Fatal("a lease granted again under its id expired 1 s after its grant, with a TTL of 10 s")
	}
	if ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: id}); err != nil || ttl.TTL <= 0 {
		t.Fatalf("time to live of the new lease: %v %v", ttl, err)
	}
}
