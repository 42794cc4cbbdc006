package etcdapi

import (
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
	if err != nil || ttl.GrantedTTL != 2 || len(ttl.Keys) != 2 {
		t.Fatalf("time to live: %v %v", ttl, err)
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
