package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdKeysShowLease: against a real three-node Cairn, through etcd's
// Go client, a key put with a lease reports it (Get, prev_kv, a watch
// event, a prefix range), a put with ignore_lease keeps it, a Txn compares on it and puts
// with a lease, and the lease's revoke deletes the keys the Txn and the
// ignore_lease put wrote.
func TestEtcdKeysShowLease(t *testing.T) {
	c := newCluster(t, 3)
	eps := c.etcdEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := newEtcdClient(t, eps[0:1]), newEtcdClient(t, eps[1:2])
	g, err := a.Grant(ctx, 60)
	must(t, err)
	leaseOf := func(key string) int64 {
		t.Helper()
		r, err := b.Get(ctx, key)
		must(t, err)
		if len(r.Kvs) == 0 {
			return -1
		}
		return int64(r.Kvs[0].Lease)
	}
	w := b.Watch(ctx, "lk/a", clientv3.WithPrevKV())
	_, err = a.Put(ctx, "lk/a", "1", clientv3.WithLease(g.ID))
	must(t, err)
	if got := leaseOf("lk/a"); got != int64(g.ID) {
		t.Fatalf("lease of lk/a: %d, want %d", got, g.ID)
	}
	p, err := a.Put(ctx, "lk/a", "2", clientv3.WithIgnoreLease(), clientv3.WithPrevKV())
	must(t, err)
	if p.PrevKv == nil || p.PrevKv.Lease != int64(g.ID) || leaseOf("lk/a") != int64(g.ID) {
		t.Fatalf("put with ignore_lease: prev %v, lease now %d, want %d", p.PrevKv, leaseOf("lk/a"), g.ID)
	}
	for n := 0; n < 2; {
		select {
		case wr := <-w:
			must(t, wr.Err())
			for _, e := range wr.Events {
				if e.Kv.Lease != int64(g.ID) || (n == 1 && (e.PrevKv == nil || e.PrevKv.Lease != int64(g.ID))) {
					t.Fatalf("watch event %d: %v prev %v, want lease %d", n, e.Kv, e.PrevKv, g.ID)
				}
				n++
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch events within 30 s")
		}
	}
	// A Txn: compare on the lease, put with it.
	r, err := b.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue("lk/b"), "=", clientv3.NoLease)).
		Then(clientv3.OpPut("lk/b", "1", clientv3.WithLease(g.ID))).Commit()
	must(t, err)
	if !r.Succeeded || leaseOf("lk/b") != int64(g.ID) {
		t.Fatalf("txn put with a lease: succeeded %v, lease %d, want %d", r.Succeeded, leaseOf("lk/b"), g.ID)
	}
	r, err = b.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue("lk/b"), "=", g.ID)).Commit()
	must(t, err)
	if !r.Succeeded {
		t.Fatal("compare lease(lk/b) = its lease failed")
	}
	// A prefix range (scattered over the shards) reports the leases too.
	_, err = b.Put(ctx, "lk/c", "1")
	must(t, err)
	pr, err := b.Get(ctx, "lk/", clientv3.WithPrefix())
	must(t, err)
	if len(pr.Kvs) != 3 || pr.Kvs[0].Lease != int64(g.ID) || pr.Kvs[1].Lease != int64(g.ID) || pr.Kvs[2].Lease != 0 {
		t.Fatalf("prefix range: %v, want lk/a and lk/b with lease %d, lk/c without", pr.Kvs, g.ID)
	}
	// Over HTTP the lease is the key's etcd-lease_int term.
	resp, err := http.Get(c.lc.URL(3) + "/v1/kv/lk/b")
	must(t, err)
	resp.Body.Close()
	if h := resp.Header.Get("X-Cairn-Index-etcd-lease_int"); h == "" {
		t.Fatalf("HTTP GET of lk/b: no X-Cairn-Index-etcd-lease_int header (%v)", resp.Header)
	}
	// The revoke deletes both keys.
	_, err = a.Revoke(ctx, g.ID)
	must(t, err)
	if leaseOf("lk/a") != -1 || leaseOf("lk/b") != -1 {
		t.Fatalf("after the revoke: lk/a %d, lk/b %d, want both gone", leaseOf("lk/a"), leaseOf("lk/b"))
	}
}
