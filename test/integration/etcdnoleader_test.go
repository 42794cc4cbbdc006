package integration

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdNoLeader: a node that cannot reach its shards' leaders (the
// two other nodes of three are paused with SIGSTOP, so every shard has
// lost its quorum from its point of view) answers etcd calls with
// Unavailable "etcdserver: no leader" once its replicas have been
// without a leader for an election timeout (1 s), well before the call's
// deadline, as etcd does; its HTTP API answers 503 no_leader. A
// serializable read is still served from its own replica. Once the
// others continue, it serves writes again.
func TestEtcdNoLeader(t *testing.T) {
	c := newCluster(t, 3)
	eps := c.etcdEndpoints(t)
	cli := newEtcdClient(t, eps[:1]) // node 1 only
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "noleader/k", "v1"); err != nil {
		t.Fatalf("put before the pause: %v", err)
	}
	for _, i := range []int{2, 3} {
		if err := c.lc.Pause(i); err != nil {
			t.Fatalf("pausing node %d: %v", i, err)
		}
	}
	resumed := false
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		for _, i := range []int{2, 3} {
			if err := c.lc.Resume(i); err != nil {
				t.Errorf("resuming node %d: %v", i, err)
			}
		}
	}
	defer resume()

	// The first put waits at most until node 1's replica of the key's
	// shard has been without a leader for an election timeout: a leader
	// steps down within two election timeouts, a follower campaigns within
	// two, then one more. 8 s of a 20 s deadline leaves room for a loaded
	// machine; before, the call was held until its deadline.
	const deadline = 20 * time.Second
	start := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, deadline)
	_, err := cli.Put(pctx, "noleader/k", "v2")
	pcancel()
	took := time.Since(start)
	if !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Fatalf("put through a node cut off from its leaders: %v after %v, want etcd's %v (Unavailable)", err, took, rpctypes.ErrNoLeader)
	}
	if took > 8*time.Second {
		t.Fatalf("put answered no leader after %v, want well before its %v deadline", took, deadline)
	}
	t.Logf("first put through the cut-off node: %v after %v", err, took.Round(time.Millisecond))

	// Now node 1 knows: the next calls answer at once.
	for _, key := range []string{"noleader/k", "noleader/other-shard-1", "noleader/other-shard-2"} {
		start = time.Now()
		pctx, pcancel := context.WithTimeout(ctx, deadline)
		_, err = cli.Put(pctx, key, "v3")
		pcancel()
		if took := time.Since(start); !errors.Is(err, rpctypes.ErrNoLeader) || took > 3*time.Second {
			t.Fatalf("put of %s through the cut-off node: %v after %v, want no leader at once", key, err, took)
		}
	}
	// HTTP: 503 no_leader, with Retry-After.
	hctx, hcancel := context.WithTimeout(ctx, deadline)
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, c.v1URL(1, "noleader/k", ""), nil)
	start = time.Now()
	resp, err := c.hc.Do(req)
	hcancel()
	if err != nil {
		t.Fatalf("HTTP GET through the cut-off node: %v", err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || took > 3*time.Second {
		t.Fatalf("HTTP GET through the cut-off node: %d (Retry-After %q) after %v, want 503 no_leader at once", resp.StatusCode, resp.Header.Get("Retry-After"), took)
	}
	// A serializable read is the local replica's.
	if got, err := cli.Get(ctx, "noleader/k", clientv3.WithSerializable()); err != nil || got.Count != 1 {
		t.Fatalf("serializable get through the cut-off node: %v %v", got, err)
	}

	resume()
	deadlineAt := time.Now().Add(30 * time.Second)
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(pctx, "noleader/k", "v4")
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadlineAt) {
			t.Fatalf("put through node 1 after the others continued: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, err := cli.Get(ctx, "noleader/k")
	if err != nil || got.Count != 1 || string(got.Kvs[0].Value) != "v4" {
		t.Fatalf("get after healing: %v %v", got, err)
	}
}
