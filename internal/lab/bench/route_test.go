package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/shard"
)

// view builds one node's /v1/cluster answer: shards split the ring in
// four, shard i on the nodes in replicas[i], led by leaders[i].
func view(node uint64, replicas [][]uint64, leaders []uint64) *clusterView {
	v := &clusterView{NodeID: node}
	for i := range replicas {
		v.Shards = append(v.Shards, client.ShardInfo{TokenStart: fmt.Sprintf("%016x", uint64(i)<<62), Replicas: replicas[i], Leader: leaders[i]})
	}
	return v
}

func TestRouteTablePrefersReplicaViews(t *testing.T) {
	reps := [][]uint64{{1, 2}, {2, 3}, {3, 1}, {1, 2}}
	// Node 1 holds no replica of shard 2 and has a stale guess (node 2);
	// the replicas of shard 2 (nodes 2 and 3) say node 3 leads it.
	views := []*clusterView{
		view(1, reps, []uint64{1, 2, 3, 2}),
		view(2, reps, []uint64{1, 3, 0, 2}),
		view(3, reps, []uint64{0, 3, 3, 0}),
	}
	index := map[uint64]int{1: 0, 2: 1, 3: 2}
	tab := buildRouteTable(views, index)
	if want := []int{0, 2, 2, 1}; fmt.Sprint(tab.leaders) != fmt.Sprint(want) {
		t.Fatalf("leaders by target index %v, want %v", tab.leaders, want)
	}
	if buildRouteTable([]*clusterView{nil, nil}, nil) != nil {
		t.Fatal("a table without any view")
	}
	r := &router{}
	r.table.Store(tab)
	for _, key := range []string{"a", "b", "key-17", "zz"} {
		got, ok := r.leaderOf([]byte(key))
		want := tab.leaders[shard.Token([]byte(key))>>62]
		if !ok || got != want {
			t.Fatalf("key %q: node index %d %v, want %d", key, got, ok, want)
		}
	}
}

func TestRouterReadsEveryNode(t *testing.T) {
	reps := [][]uint64{{1}, {2}, {1}, {2}}
	leaders := []uint64{1, 2, 1, 2}
	var bases []string
	for node := uint64(1); node <= 2; node++ {
		v := view(node, reps, leaders)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/cluster" {
				http.NotFound(w, r)
				return
			}
			json.NewEncoder(w).Encode(v)
		}))
		defer srv.Close()
		bases = append(bases, srv.URL)
	}
	r := newRouter(bases, time.Second, nil)
	defer r.stop()
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		i := shard.Token([]byte(key)) >> 62
		got, ok := r.leaderOf([]byte(key))
		if !ok || uint64(got) != leaders[i]-1 {
			t.Fatalf("key %q in shard %d: target %d %v, want %d", key, i, got, ok, leaders[i]-1)
		}
	}
}
