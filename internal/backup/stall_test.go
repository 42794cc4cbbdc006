package backup

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// A replica that starts a shard's stream and then sends nothing more (a
// paused node) is given up after stallTimeout, and the shard is taken
// from the next replica; before, the backup waited for the paused node
// as long as its own deadline allowed.
func TestBackupLeavesAStalledReplica(t *testing.T) {
	defer func(d time.Duration) { stallTimeout = d }(stallTimeout)
	stallTimeout = 300 * time.Millisecond
	var addrs [2]string
	var lns [2]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skip(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	hdr := wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 4}
	cluster := func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(client.ClusterInfo{NodeID: 1, Replication: 2,
			Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: addrs[0], Reachable: true}, {NodeID: 2, HTTPAddr: addrs[1], Reachable: true}},
			Shards:  []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1, 2}, Leader: 1}}})
	}
	stalls := func(w http.ResponseWriter, r *http.Request) { // the leader: a header, then nothing
		bw, err := wire.NewBackupWriter(w, hdr)
		if err != nil {
			return
		}
		_ = bw.Add([]byte("a"), 1, nil, []byte("v-a"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	streams := func(w http.ResponseWriter, r *http.Request) {
		bw, err := wire.NewBackupWriter(w, hdr)
		if err != nil {
			return
		}
		_ = bw.Add([]byte("a"), 1, nil, []byte("v-a"))
		_ = bw.Close()
	}
	for i, stream := range []http.HandlerFunc{stalls, streams} {
		serveShard1(t, lns[i], cluster, stream)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	m, err := Backup(ctx, Config{Endpoint: "http://" + addrs[0], Dir: filepath.Join(t.TempDir(), "b")})
	if err != nil {
		t.Fatalf("backup with a stalled leader: %v after %v", err, time.Since(start))
	}
	if len(m.Shards) != 1 || m.Shards[0].Node != 2 || m.Keys() != 1 {
		t.Fatalf("backup: %+v, want shard 1 from node 2", m.Shards)
	}
}

// serveShard1 serves, on ln until the test ends, a node's /v1/cluster
// (cluster) and its backup stream of shard 1 (stream), over HTTP/1.1
// and unencrypted HTTP/2 as a node does.
func serveShard1(t *testing.T, ln net.Listener, cluster, stream http.HandlerFunc) {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/cluster", cluster)
	mux.HandleFunc("/v1/admin/backup/shards/1", stream)
	serveNode(t, ln, mux)
}

// serveNode serves mux on ln, over HTTP/1.1 and unencrypted HTTP/2 as a
// node does, until the test ends.
func serveNode(t *testing.T, ln net.Listener, mux *http.ServeMux) {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}
