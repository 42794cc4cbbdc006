package bench

import (
	"context"
	"crypto/tls"
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/shard"
)

// Request routing of the Cairn driver (DriverConfig.Route).
const (
	// RouteLeader sends each request to the node that leads its key's
	// shard, as a Multi-Raft client that knows the shard map does; a
	// request that reaches another node (a stale map) is still routed
	// there by the node, only one hop longer.
	RouteLeader = "leader"
	// RouteFixed pins connection i to node i mod n, whatever the key.
	RouteFixed = "fixed"
)

// routeRefresh is how often the router re-reads the shard leaders.
const routeRefresh = time.Second

// router maps keys to the index of the target node leading their shard.
type router struct {
	bases []string
	hc    *http.Client
	table atomic.Pointer[routeTable]
	stopc chan struct{}
	done  chan struct{}
}

// routeTable: shard i covers tokens [starts[i], starts[i+1]) and is led
// by node index leaders[i] (-1: unknown).
type routeTable struct {
	starts  []uint64
	leaders []int
}

func newRouter(bases []string, timeout time.Duration, tlsCfg *tls.Config) *router {
	r := &router{bases: bases, hc: &http.Client{Timeout: min(timeout, 2*time.Second),
		Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), MaxIdleConnsPerHost: 2}},
		stopc: make(chan struct{}), done: make(chan struct{})}
	r.refresh()
	go r.loop()
	return r
}

func (r *router) loop() {
	defer close(r.done)
	t := time.NewTicker(routeRefresh)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.refresh()
		case <-r.stopc:
			return
		}
	}
}

func (r *router) stop() {
	close(r.stopc)
	<-r.done
	r.hc.CloseIdleConnections()
}

// clusterView is a node's GET /v1/cluster.
type clusterView = client.ClusterInfo

// refresh asks every node for its view; each shard's leader is the one
// its replicas report.
func (r *router) refresh() {
	views := make([]*clusterView, len(r.bases))
	index := map[uint64]int{} // node id -> target index
	for i, b := range r.bases {
		v, err := r.view(b)
		if err != nil {
			continue
		}
		views[i] = v
		index[v.NodeID] = i
	}
	if t := buildRouteTable(views, index); t != nil {
		r.table.Store(t)
	}
}

func (r *router) view(base string) (*clusterView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.hc.Timeout)
	defer cancel()
	v, err := client.NewAdmin(base, r.hc).Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// buildRouteTable combines the nodes' views (by target index; nil: no
// answer); nil when no node answered.
func buildRouteTable(views []*clusterView, index map[uint64]int) *routeTable {
	var t *routeTable
	for _, v := range views {
		if v == nil {
			continue
		}
		if t == nil {
			t = &routeTable{}
			for _, s := range v.Shards {
				start, err := strconv.ParseUint(s.TokenStart, 16, 64)
				if err != nil {
					return nil
				}
				t.starts = append(t.starts, start)
				t.leaders = append(t.leaders, -1)
			}
			if !sort.SliceIsSorted(t.starts, func(i, j int) bool { return t.starts[i] < t.starts[j] }) {
				return nil
			}
		}
		if len(v.Shards) != len(t.starts) {
			continue
		}
		for i, s := range v.Shards {
			holds := false
			for _, id := range s.Replicas {
				holds = holds || id == v.NodeID
			}
			// A replica's view of its own shard's leader wins over a
			// node's routing guess.
			if n, ok := index[s.Leader]; ok && (t.leaders[i] < 0 || holds) {
				t.leaders[i] = n
			}
		}
	}
	return t
}

// leaderOf returns the target index of the node leading key's shard.
func (r *router) leaderOf(key []byte) (int, bool) {
	t := r.table.Load()
	if t == nil || len(t.starts) == 0 {
		return 0, false
	}
	tok := shard.Token(key)
	i := sort.Search(len(t.starts), func(i int) bool { return t.starts[i] > tok }) - 1
	if i < 0 {
		return 0, false
	}
	return t.leaders[i], t.leaders[i] >= 0
}
