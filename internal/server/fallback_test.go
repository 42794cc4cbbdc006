package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/cluster"
)

// A record read through a peer's GET /v1/admin/nodes is the record
// whole: roles, settings and the rebalancing pause come through.
func TestRecordOfNodesKeepsTheWholeRecord(t *testing.T) {
	limit, rate, off := 3, int64(1<<20), false
	rec := cluster.Record{
		Members: []cluster.Member{
			{ID: 1, HTTPAddr: "127.0.0.1:8080", PeerAddr: "127.0.0.1:9080", State: cluster.Active},
			{ID: 4, HTTPAddr: "127.0.0.1:8083", PeerAddr: "127.0.0.1:9083", State: cluster.Active, Role: cluster.ReadReplica},
		},
		UsedIDs:     []uint64{1, 2, 3, 4},
		Settings:    cluster.Settings{TransferLimit: &limit, SnapshotRate: &rate, Rebalance: &off},
		PausedUntil: 12345,
	}
	// What the peer answers, as its handler encodes it.
	body, err := json.Marshal(map[string]any{"version": 9, "members": rec.Members, "used_ids": rec.UsedIDs,
		"settings": rec.Settings, "rebalance_paused_until": rec.PausedUntil})
	if err != nil {
		t.Fatal(err)
	}
	var n client.Nodes
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	if got := recordOfNodes(n); !reflect.DeepEqual(got, rec) {
		t.Fatalf("record through a peer:\n%+v\nwant\n%+v", got, rec)
	}
}
