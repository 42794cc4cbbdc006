package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

// The client's types decode everything the server's types encode, field
// for field (a field added on one side only fails here).
func TestAdminTypesMatchServer(t *testing.T) {
	for _, c := range []struct{ server, client any }{
		{kv.ClusterInfo{NodeID: 1, Replication: 3,
			Members: []kv.MemberInfo{{NodeID: 1, PeerAddr: "p", HTTPAddr: "h", Reachable: true}},
			Shards:  []kv.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 2, Replicas: []uint64{1, 2, 3}, Leader: 2, Term: 4, Applied: 5, Commit: 6}}},
			&ClusterInfo{}},
		{kv.NodeStatus{NodeID: 1, HTTPAddr: "h", PeerAddr: "p", Replicas: 2, Leaders: 1, Replication: 3, ShardCount: 4, UptimeSec: 1.5, Version: "v",
			Disk: &kv.DiskState{Refusing: kv.DiskFull, Injected: true, FreeBytes: 1, ReserveBytes: 2, UsedBytes: 3, QuotaBytes: 4}}, &NodeStatus{}},
		{[]kv.ShardHash{{Shard: 1, Applied: 2, Hash: "ab"}}, &[]ShardHash{}},
	} {
		raw, err := json.Marshal(c.server)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c.client); err != nil {
			t.Fatalf("%T into %T: %v", c.server, c.client, err)
		}
		back, _ := json.Marshal(c.client)
		var a, b any
		_ = json.Unmarshal(raw, &a)
		_ = json.Unmarshal(back, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%T: server %s, client %s", c.server, raw, back)
		}
	}
}

func TestAdmin(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		switch r.URL.Path {
		case "/v1/cluster":
			w.Write([]byte(`{"node_id":2,"shards":[{"id":1,"token_start":"0000000000000000","token_end":"8000000000000000","leader":3,"replicas":[1,3]}]}`))
		case "/v1/admin/fault":
			if r.URL.Query().Get("partition") == "9" {
				jsonErr(w, http.StatusForbidden, "forbidden")
				return
			}
			w.Write([]byte(`{"status":"ok"}`))
		default:
			jsonErr(w, http.StatusNotFound, "not_found")
		}
	}))
	defer srv.Close()
	a := NewAdmin(srv.URL+"/", nil)
	ctx := context.Background()
	ci, err := a.Cluster(ctx)
	if err != nil || ci.NodeID != 2 || len(ci.Shards) != 1 || ci.Shards[0].Leader != 3 {
		t.Fatalf("Cluster: %+v %v", ci, err)
	}
	s := ci.Shards[0]
	if !s.Owns(0) || !s.Owns(1<<63-1) || s.Owns(1<<63) || !s.HasReplica(3) || s.HasReplica(2) {
		t.Fatalf("Owns/HasReplica of %+v", s)
	}
	if err := a.Partition(ctx, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := a.DiskStall(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.ClockSkew(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.ClockJump(ctx, -time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.HealFaults(ctx); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if err := a.Partition(ctx, 9); !errors.As(err, &e) || e.Status != 403 || e.Code != "forbidden" {
		t.Fatalf("refused fault: %v", err)
	}
	if _, err := a.Hashes(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Hashes on a node without them: %v", err)
	}
	want := []string{"GET /v1/cluster", "POST /v1/admin/fault?partition=2%2C3", "POST /v1/admin/fault?disk-stall=1s",
		"POST /v1/admin/fault?clock-skew=2m0s", "POST /v1/admin/fault?clock-jump=-1m0s",
		"POST /v1/admin/fault?clock-skew=0s&disk-full=false&disk-stall=0s&partition=", "POST /v1/admin/fault?partition=9", "GET /v1/admin/hashes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	// The multi-node client asks the first node that answers.
	cl, _ := New([]string{"127.0.0.1:1", srv.URL}, Options{})
	if ci, err := cl.Cluster(ctx); err != nil || ci.NodeID != 2 {
		t.Fatalf("Client.Cluster: %+v %v", ci, err)
	}
}
