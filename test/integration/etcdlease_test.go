package integration

import (
	"context"
	be "encoding/binary"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdLease drives leases through etcd's Go client against a real
// three-node Cairn: a key put with a lease is deleted when the lease
// expires (never before its TTL), a revoke deletes it at once, a
// keepalive keeps it, and TimeToLive and Leases report the leases.
func TestEtcdLease(t *testing.T) {
	c := newCluster(t, 3)
	eps := c.etcdEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := newEtcdClient(t, eps[0:1]), newEtcdClient(t, eps[1:2])
	exists := func(key string) bool {
		t.Helper()
		r, err := b.Get(ctx, key)
		must(t, err)
		return r.Count == 1
	}
	waitGone := func(key string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for exists(key) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still exists %v after its lease should have expired", key, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Expiry.
	start := time.Now()
	g, err := a.Grant(ctx, 2)
	must(t, err)
	if g.TTL != 2 || g.ID == 0 {
		t.Fatalf("grant: %+v", g)
	}
	_, err = b.Put(ctx, "l/a", "1", clientv3.WithLease(g.ID))
	must(t, err)
	ttl, err := a.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	must(t, err)
	if ttl.GrantedTTL != 2 || ttl.TTL < 0 || ttl.TTL > 2 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "l/a" {
		t.Fatalf("time to live: %+v", ttl)
	}
	ls, err := b.Leases(ctx)
	must(t, err)
	if len(ls.Leases) != 1 || ls.Leases[0].ID != g.ID {
		t.Fatalf("leases: %+v", ls)
	}
	waitGone("l/a", 20*time.Second)
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("a lease of 2 s expired after %v", d)
	}
	t.Logf("a 2 s lease's key was gone %v after the grant", time.Since(start).Round(10*time.Millisecond))
	if ttl, err := a.TimeToLive(ctx, g.ID); err != nil || ttl.TTL != -1 {
		t.Fatalf("time to live of an expired lease: %+v %v", ttl, err)
	}

	// Revoke.
	g2, err := a.Grant(ctx, 60)
	must(t, err)
	_, err = a.Put(ctx, "l/b", "1", clientv3.WithLease(g2.ID))
	must(t, err)
	_, err = b.Revoke(ctx, g2.ID)
	must(t, err)
	if exists("l/b") {
		t.Fatal("the key of a revoked lease survives the revoke")
	}

	// Keepalive.
	g3, err := b.Grant(ctx, 2)
	must(t, err)
	_, err = a.Put(ctx, "l/c", "1", clientv3.WithLease(g3.ID))
	must(t, err)
	kctx, kcancel := context.WithCancel(ctx)
	kch, err := a.KeepAlive(kctx, g3.ID)
	must(t, err)
	renewals := 0
	for until := time.Now().Add(6 * time.Second); time.Now().Before(until); {
		select {
		case r, ok := <-kch:
			if !ok {
				t.Fatal("keepalive channel closed while the lease is kept alive")
			}
			if r.TTL != 2 {
				t.Fatalf("keepalive answer: %+v", r)
			}
			renewals++
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !exists("l/c") || renewals == 0 {
		t.Fatalf("after 6 s of keepalive (%d renewals), l/c exists: %v", renewals, exists("l/c"))
	}
	kcancel()
	waitGone("l/c", 20*time.Second)

	t.Run("ExpiryAfterOwnerLeaderKill", func(t *testing.T) { testLeaseOwnerKill(t, c, eps) })
}

// testLeaseOwnerKill kills (SIGKILL) the leader of a lease's owner shard:
// the shard's next leader expires the lease and deletes its key.
func testLeaseOwnerKill(t *testing.T, c *cluster, eps []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := newEtcdClient(t, eps)
	g, err := cli.Grant(ctx, 3)
	must(t, err)
	_, err = cli.Put(ctx, "l/owner", "1", clientv3.WithLease(g.ID))
	must(t, err)
	rec := "\x00etcd-lease/" + string(be.BigEndian.AppendUint64(nil, uint64(g.ID)))
	sh := c.shardOf(1, []string{rec})[rec]
	ci, err := c.clusterInfo(1)
	must(t, err)
	lead := 0
	for _, s := range ci.Shards {
		if s.ID == sh {
			lead = int(s.Leader)
		}
	}
	if lead == 0 {
		t.Fatalf("shard %d has no leader", sh)
	}
	c.kill(lead)
	var others []string
	for i, ep := range eps {
		if i+1 != lead {
			others = append(others, ep)
		}
	}
	survivor := newEtcdClient(t, others)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := survivor.Get(ctx, "l/owner")
		if err == nil && r.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("l/owner still there 30 s after its owner shard's leader (node %d) was killed: %v %v", lead, r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ttl, err := survivor.TimeToLive(ctx, g.ID); err != nil || ttl.TTL != -1 {
		t.Fatalf("time to live after expiry: %+v %v", ttl, err)
	}
	t.Logf("lease of shard %d expired by the next leader after node %d was killed", sh, lead)
}
