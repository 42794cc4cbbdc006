package etcdapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// leaseAt reads key's lease through Range (0: absent or none).
func leaseAt(t *testing.T, k *kvServer, key string) int64 {
	t.Helper()
	r, err := k.Range(ctx, &pb.RangeRequest{Key: []byte(key)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return r.Kvs[0].Lease
}

// A key reports the lease it was put with, in Range and prev_kv; a put
// without a lease drops it, one with ignore_lease keeps it (and the lease
// still deletes the key at its end).
func TestKeysReportTheirLease(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("plain"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if got := leaseAt(t, k, "a"); got != g.ID {
		t.Fatalf("lease of a: %d, want %d", got, g.ID)
	}
	if got := leaseAt(t, k, "plain"); got != 0 {
		t.Fatalf("lease of a key put without one: %d", got)
	}
	// A keys_only Range of one key reads the key's object (for its
	// version) and so reports its lease too.
	if r, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), KeysOnly: true}); err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != g.ID || r.Kvs[0].Value != nil {
		t.Fatalf("keys_only range of a: %v %v, want lease %d and no value", r, err, g.ID)
	}
	// ignore_lease keeps it, and its prev_kv shows it.
	p, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("2"), IgnoreLease: true, PrevKv: true})
	if err != nil || p.PrevKv == nil || p.PrevKv.Lease != g.ID {
		t.Fatalf("put with ignore_lease and prev_kv: %v %v", p, err)
	}
	if got := leaseAt(t, k, "a"); got != g.ID {
		t.Fatalf("lease of a after a put with ignore_lease: %d, want %d", got, g.ID)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("absent"), Value: []byte("1"), IgnoreLease: true}); err != rpctypes.ErrGRPCKeyNotFound {
		t.Fatalf("ignore_lease on an absent key: %v", err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), IgnoreLease: true, Lease: g.ID}); err != rpctypes.ErrGRPCLeaseProvided {
		t.Fatalf("ignore_lease with a lease: %v", err)
	}
	// The record lists a at the version the ignore_lease put wrote: a
	// revoke deletes it.
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g.ID}); err != nil {
		t.Fatal(err)
	}
	if exists(f, "a") || !exists(f, "plain") {
		t.Fatalf("after the revoke: a exists %v (want false), plain %v (want true)", exists(f, "a"), exists(f, "plain"))
	}
	// A put without a lease detaches: the key no longer shows one.
	g2, _ := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("1"), Lease: g2.ID}); err != nil {
		t.Fatal(err)
	}
	d, err := k.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("2"), PrevKv: true})
	if err != nil || d.PrevKv.Lease != g2.ID || leaseAt(t, k, "b") != 0 {
		t.Fatalf("put without the lease: prev %v %v, lease now %d", d, err, leaseAt(t, k, "b"))
	}
}

// A Txn's put may carry a lease (the key is attached as by Put), and a
// compare on the lease sees the key's.
func TestTxnLease(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, _ := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	put := func(lease int64) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: lease}}}
	}
	leaseIs := func(id int64) *pb.Compare {
		return &pb.Compare{Key: []byte("k"), Target: pb.Compare_LEASE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Lease{Lease: id}}
	}
	rng := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	// Absent: lease 0, so "lease = 0" holds; the put attaches the key.
	r, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{leaseIs(0)}, Success: []*pb.RequestOp{put(g.ID), rng}})
	if err != nil || !r.Succeeded {
		t.Fatalf("txn put with a lease: %v %v", r, err)
	}
	if got := r.Responses[1].GetResponseRange().Kvs[0].Lease; got != g.ID {
		t.Fatalf("the Txn's read after its put: lease %d, want %d", got, g.ID)
	}
	if got := leaseAt(t, k, "k"); got != g.ID {
		t.Fatalf("lease after the Txn: %d, want %d", got, g.ID)
	}
	for _, c := range []struct {
		id   int64
		want bool
	}{{g.ID, true}, {0, false}, {g.ID + 1, false}} {
		r, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{leaseIs(c.id)}})
		if err != nil || r.Succeeded != c.want {
			t.Fatalf("compare lease = %d: %v %v, want %v", c.id, r.Succeeded, err, c.want)
		}
	}
	// A put with an unknown lease: LeaseNotFound, nothing written.
	before := leaseAt(t, k, "k")
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{put(g.ID + 7)}}); err != rpctypes.ErrGRPCLeaseNotFound {
		t.Fatalf("txn put with an unknown lease: %v", err)
	}
	if leaseAt(t, k, "k") != before {
		t.Fatal("a Txn with an unknown lease changed the key")
	}
	// The lease's end deletes the key the Txn attached.
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g.ID}); err != nil || exists(f, "k") {
		t.Fatalf("revoke: %v, key still there: %v", err, exists(f, "k"))
	}
}

// A conditional put with a lease whose condition fails (another write
// came first) leaves the lease's record as it was: the key, not written
// under the lease, is not deleted at the lease's end.
func TestTxnLeaseConditionFailed(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, _ := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	f.set("k", "old")
	// Between the Txn's read and its write, another client rewrites k:
	// the Txn evaluates again and takes the else branch.
	f.beforeWrite = func(f *fakeBackend) {
		f.beforeWrite = func(f *fakeBackend) { f.set("k", "other") }
	}
	isOld := &pb.Compare{Key: []byte("k"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("old")}}
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("new"), Lease: g.ID}}}
	r, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{isOld}, Success: []*pb.RequestOp{put}})
	if err != nil || r.Succeeded {
		t.Fatalf("txn: %v %v, want the else branch after the other write", r, err)
	}
	ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID, Keys: true})
	if err != nil || len(ttl.Keys) != 0 {
		t.Fatalf("lease keys after a Txn that wrote nothing: %q %v", ttl.Keys, err)
	}
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g.ID}); err != nil || !exists(f, "k") {
		t.Fatalf("revoke: %v; k exists %v, want true", err, exists(f, "k"))
	}
}

// Watch events report the lease of the key they write and, with
// prev_kv, of the value they replace.
func TestWatchEventsReportLease(t *testing.T) {
	s, _ := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, _ := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	st := watchClient(t, s)
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("w"), PrevKv: true})
	if !c.Created {
		t.Fatalf("create: %v", c)
	}
	for _, p := range []*pb.PutRequest{
		{Key: []byte("w"), Value: []byte("1"), Lease: g.ID},
		{Key: []byte("w"), Value: []byte("2")},
	} {
		if _, err := k.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("w")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		for _, e := range recv(t, st).Events {
			s := fmt.Sprintf("%s %s lease %d", e.Type, e.Kv.Value, e.Kv.Lease)
			if e.PrevKv != nil {
				s += fmt.Sprintf(" prev %s lease %d", e.PrevKv.Value, e.PrevKv.Lease)
			}
			got = append(got, s)
		}
	}
	want := fmt.Sprintf("[PUT 1 lease %d PUT 2 lease 0 prev 1 lease %d DELETE  lease 0 prev 2 lease 0]", g.ID, g.ID)
	if fmt.Sprint(got) != want {
		t.Fatalf("events %q, want %s", got, want)
	}
}

// A Range over several keys reports each key's lease too.
func TestRangeManyReportsLease(t *testing.T) {
	s, _ := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, _ := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
	for _, p := range []*pb.PutRequest{{Key: []byte("r/a"), Value: []byte("1"), Lease: g.ID}, {Key: []byte("r/b"), Value: []byte("1")}} {
		if _, err := k.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	r, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("r/"), RangeEnd: []byte("r0")})
	if err != nil || len(r.Kvs) != 2 || r.Kvs[0].Lease != g.ID || r.Kvs[1].Lease != 0 {
		t.Fatalf("range: %v %v, want r/a with lease %d and r/b without", r, err, g.ID)
	}
}

// A conditional put with a lease whose condition fails gives the lease's
// record back what it listed of the key, but not over the attachment
// another put with the same lease made meanwhile: the key that put wrote
// stays attached, and the lease's end deletes it.
func TestFailedLeasedPutKeepsAConcurrentAttachment(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v0"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	// The Txn lists k as in flight (its first write), then, before its
	// put, another client puts k with the same lease: the Txn's put
	// fails, and its compare then takes the other branch.
	f.beforeWrite = func(f *fakeBackend) {
		f.beforeWrite = func(*fakeBackend) {
			if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("other"), Lease: g.ID}); err != nil {
				t.Error(err)
			}
		}
	}
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("txn"), Lease: g.ID}}}
	resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpValue("k", "v0", pb.Compare_EQUAL)}, Success: []*pb.RequestOp{put}})
	if err != nil || resp.Succeeded {
		t.Fatalf("txn: %v %v, want its failure branch", resp, err)
	}
	ttl, err := l.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID, Keys: true})
	if err != nil || len(ttl.Keys) != 1 {
		t.Errorf("time to live: %v %v, want k attached (put with the lease by the other client)", ttl, err)
	}
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g.ID}); err != nil {
		t.Fatal(err)
	}
	if exists(f, "k") {
		t.Fatal("k, put with the lease, survived the lease's revoke")
	}
}

// Two puts of a key with the same lease, the later one attached first:
// the earlier one's attachment does not take the record back to its own,
// older version, so the lease's end still deletes the key.
func TestLeasedPutsAttachedOutOfOrder(t *testing.T) {
	s, f := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	// The first put's writes: the record (in flight), the key, then the
	// record again (its version); the second put runs whole before that.
	f.beforeWrite = func(f *fakeBackend) {
		f.beforeWrite = func(f *fakeBackend) {
			f.beforeWrite = func(*fakeBackend) {
				if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("second"), Lease: g.ID}); err != nil {
					t.Error(err)
				}
			}
		}
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("first"), Lease: g.ID}); err != nil {
		t.Fatal(err)
	}
	if v := f.data["k"]; string(v.Data) != "second" {
		t.Fatalf("k = %q, want the second put's value", v.Data)
	}
	if _, err := l.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: g.ID}); err != nil {
		t.Fatal(err)
	}
	if exists(f, "k") {
		t.Fatal("k, put with the lease, survived the lease's revoke")
	}
}
