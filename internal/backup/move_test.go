package backup

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// movedShard is a fake cluster of three nodes whose one shard was on
// nodes 1 and 2 at the backup's first reading of /v1/cluster (where node
// 3 was not a member yet) and has moved to node 3 since: nodes 1 and 2
// answer 404 no_replica for its stream. With learns, the readings of
// /v1/cluster after the first show the move. It returns node 1's URL and
// the count of /v1/cluster readings.
func movedShard(t *testing.T, learns bool) (string, *atomic.Int32) {
	t.Helper()
	var addrs [3]string
	var lns [3]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skip(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	var reads atomic.Int32
	cluster := func(w http.ResponseWriter, r *http.Request) {
		ci := client.ClusterInfo{NodeID: 1, Replication: 2,
			Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: addrs[0], Reachable: true}, {NodeID: 2, HTTPAddr: addrs[1], Reachable: true}},
			Shards:  []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1, 2}, Leader: 1}}}
		if reads.Add(1) > 1 && learns {
			ci.Members = append(ci.Members, client.MemberInfo{NodeID: 3, HTTPAddr: addrs[2], Reachable: true})
			ci.Shards[0].Replicas, ci.Shards[0].Leader = []uint64{3}, 3
		}
		_ = json.NewEncoder(w).Encode(ci)
	}
	noReplica := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no_replica","message":"kv: this node holds no replica of the shard: shard 1 (its replicas are on nodes [3])"}` + "\n"))
	}
	streams := func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 8}, true)
	}
	for i, stream := range []http.HandlerFunc{noReplica, noReplica, streams} {
		serveShard1(t, lns[i], cluster, stream)
	}
	return "http://" + addrs[0], &reads
}

// A shard that moves off every node the backup knew of while it runs
// is looked for again: the backup reads the cluster again and takes the
// shard from the node it moved to (one that joined meanwhile). Before,
// the backup failed.
func TestBackupFindsAShardThatMoved(t *testing.T) {
	quickRetries(t)
	url, reads := movedShard(t, true)
	dir := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Backup(ctx, Config{Endpoint: url, Dir: dir})
	if err != nil {
		t.Fatalf("backup of a shard that moved to node 3: %v", err)
	}
	if len(m.Shards) != 1 || m.Shards[0].Node != 3 || m.Keys() != 1 {
		t.Fatalf("backup: %+v, want shard 1 from node 3", m.Shards)
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("the cluster was read %d times, want twice (once more for the move)", n)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// When the cluster never shows where the shard went, the backup reads it
// a bounded number of times and fails, naming the answer it got.
func TestBackupOfAShardThatMovedNowhereFails(t *testing.T) {
	quickRetries(t)
	url, reads := movedShard(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Backup(ctx, Config{Endpoint: url, Dir: filepath.Join(t.TempDir(), "b")})
	if !errors.Is(err, errNoReplica) {
		t.Fatalf("backup of a shard no node holds: %v, want errNoReplica", err)
	}
	if n := reads.Load(); n != 1+shardMoves {
		t.Errorf("the cluster was read %d times, want %d (once, then once per look for the shard)", n, 1+shardMoves)
	}
}
