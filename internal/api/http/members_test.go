package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/cluster"
)

// fakeMembers applies the record's transitions to an in-memory record.
type fakeMembers struct {
	mu  sync.Mutex
	rec cluster.Record
}

func (f *fakeMembers) apply(change func(cluster.Record) (cluster.Record, bool, error)) (cluster.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, _, err := change(f.rec)
	if err != nil {
		return f.rec, err
	}
	f.rec = out
	return out, nil
}

func (f *fakeMembers) Nodes(context.Context) (cluster.Record, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rec.Clone(), 7, nil
}

func (f *fakeMembers) Join(_ context.Context, req cluster.JoinRequest) (cluster.JoinResponse, error) {
	rec, err := f.apply(func(r cluster.Record) (cluster.Record, bool, error) {
		return r.Join(req.NodeID, req.HTTPAddr, req.PeerAddr)
	})
	return cluster.JoinResponse{Members: rec.Members, Replication: 3}, err
}

func (f *fakeMembers) Decommission(_ context.Context, id uint64) (cluster.Member, error) {
	rec, err := f.apply(func(r cluster.Record) (cluster.Record, bool, error) { return r.Decommission(id, 3) })
	m, _ := rec.Member(id)
	return m, err
}

func (f *fakeMembers) RemoveDead(_ context.Context, id uint64) (cluster.Member, error) {
	rec, err := f.apply(func(r cluster.Record) (cluster.Record, bool, error) { return r.MarkDead(id) })
	m, _ := rec.Member(id)
	return m, err
}

func (f *fakeMembers) SetSettings(_ context.Context, s cluster.Settings) (cluster.Settings, error) {
	rec, err := f.apply(func(r cluster.Record) (cluster.Record, bool, error) { return r.WithSettings(s) })
	return rec.Settings, err
}

func (f *fakeMembers) Balancer() cluster.BalancerStatus { return cluster.BalancerStatus{Leading: true} }

func TestReservedKeysAreRefused(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	for _, c := range []struct{ method, target string }{
		{"GET", "/v1/kv/%00sys%2Fmembers"},
		{"PUT", "/v1/kv/%00anything"},
		{"DELETE", "/v1/kv/%00"},
		{"HEAD", "/v1/kv/%00x"},
		{"GET", "/v0/entity?id=%00sys%2Fmembers"},
		{"PUT", "/v0/entity?id=%00x"},
		{"DELETE", "/v0/entity?id=%00x"},
	} {
		r := do(t, h, c.method, c.target, strings.NewReader("v"), nil)
		if r.code != 400 {
			t.Errorf("%s %s: %d, want 400", c.method, c.target, r.code)
			continue
		}
		if c.method != "HEAD" {
			if code := errCode(t, r); code != "reserved_key" {
				t.Errorf("%s %s: error %q, want reserved_key", c.method, c.target, code)
			}
		}
	}
	// A 0x00 byte elsewhere in a key is an ordinary key.
	if r := do(t, h, "PUT", "/v1/kv/a%00b", strings.NewReader("v"), nil); r.code != 201 {
		t.Fatalf("PUT a\\x00b: %d %s", r.code, r.body)
	}
}

func TestMembershipRoutes(t *testing.T) {
	f := &fakeMembers{rec: cluster.Bootstrap(map[uint64]string{1: "p1", 2: "p2", 3: "p3"})}
	h := mustNew(t, newFake(), Config{Members: f})
	join := func(body string) resp {
		return do(t, h, "POST", "/v1/admin/nodes/join", strings.NewReader(body), nil)
	}
	r := join(`{"node_id":4,"http_addr":"h4","peer_addr":"p4"}`)
	if r.code != 200 {
		t.Fatalf("join: %d %s", r.code, r.body)
	}
	var jr cluster.JoinResponse
	if err := json.Unmarshal([]byte(r.body), &jr); err != nil || len(jr.Members) != 4 {
		t.Fatalf("join answer %s (%v)", r.body, err)
	}
	for _, c := range []struct {
		body string
		code int
		err  string
	}{
		{`{"node_id":4,"http_addr":"h4","peer_addr":"elsewhere"}`, 409, "node_id_in_use"},
		{`{"node_id":5,"http_addr":"h5","peer_addr":"p4"}`, 409, "address_in_use"},
		{`{"node_id":0,"http_addr":"h5","peer_addr":"p5"}`, 400, "bad_request"},
		{`{"node_id":5,"bogus":1}`, 400, "bad_request"},
		{`not json`, 400, "bad_request"},
	} {
		r := join(c.body)
		if r.code != c.code || errCode(t, r) != c.err {
			t.Errorf("join %s: %d %s, want %d %s", c.body, r.code, r.body, c.code, c.err)
		}
	}
	if r := do(t, h, "GET", "/v1/admin/nodes/join", nil, nil); r.code != 405 {
		t.Errorf("GET join: %d", r.code)
	}
	if r := do(t, h, "POST", "/v1/admin/nodes/4/remove", nil, nil); r.code != 400 {
		t.Errorf("remove without dead=true: %d %s", r.code, r.body)
	}
	if r := do(t, h, "POST", "/v1/admin/nodes/x/decommission", nil, nil); r.code != 400 {
		t.Errorf("decommission of node x: %d %s", r.code, r.body)
	}
	if r := do(t, h, "POST", "/v1/admin/nodes/9/decommission", nil, nil); r.code != 404 || errCode(t, r) != "unknown_node" {
		t.Errorf("decommission of unknown node: %d %s", r.code, r.body)
	}
	r = do(t, h, "POST", "/v1/admin/nodes/2/decommission", nil, nil)
	if r.code != 200 || !strings.Contains(r.body, `"decommissioning"`) {
		t.Fatalf("decommission: %d %s", r.code, r.body)
	}
	if r := do(t, h, "POST", "/v1/admin/nodes/3/decommission", nil, nil); r.code != 409 || errCode(t, r) != "too_few_nodes" {
		t.Errorf("second decommission leaving 2 active nodes: %d %s", r.code, r.body)
	}
	if r := do(t, h, "POST", "/v1/admin/nodes/4/remove?dead=true", nil, nil); r.code != 200 || !strings.Contains(r.body, `"dead"`) {
		t.Fatalf("remove --dead: %d %s", r.code, r.body)
	}
	r = join(`{"node_id":4,"http_addr":"h4","peer_addr":"p4"}`)
	if r.code != 410 || errCode(t, r) != "node_removed" {
		t.Fatalf("rejoin of a dead node: %d %s, want 410 node_removed", r.code, r.body)
	}
	r = do(t, h, "PUT", "/v1/admin/settings", strings.NewReader(`{"transfer_limit":4,"snapshot_rate":1048576}`), nil)
	if r.code != 200 || !strings.Contains(r.body, `"transfer_limit": 4`) {
		t.Fatalf("settings: %d %s", r.code, r.body)
	}
	if r := do(t, h, "PUT", "/v1/admin/settings", strings.NewReader(`{"transfer_limit":0}`), nil); r.code != 400 {
		t.Fatalf("transfer limit 0: %d %s", r.code, r.body)
	}
	r = do(t, h, "GET", "/v1/admin/nodes", nil, nil)
	var nodes NodesAnswer
	if err := json.Unmarshal([]byte(r.body), &nodes); err != nil || len(nodes.Members) != 4 || !nodes.Balancer.Leading || nodes.Version != 7 {
		t.Fatalf("nodes: %d %s (%v)", r.code, r.body, err)
	}
}

func TestMembershipRoutesWithoutMembership(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	r := do(t, h, "GET", "/v1/admin/nodes", nil, nil)
	if r.code != 503 || errCode(t, r) != "membership_not_ready" {
		t.Fatalf("nodes without membership: %d %s", r.code, r.body)
	}
}

// A body that is JSON but not an object (null, a number, a list) is not
// a request: PUT /v1/admin/settings with null answered 200 {} as if
// the client had asked for nothing, and a join with null would have
// gone on with a zero request. Both are 400 naming what is wanted, and
// nothing changes.
func TestAdminBodyMustBeAnObject(t *testing.T) {
	f := &fakeMembers{rec: cluster.Bootstrap(map[uint64]string{1: "p1", 2: "p2", 3: "p3"})}
	h := mustNew(t, newFake(), Config{Members: f})
	before := fmt.Sprintf("%+v", f.rec)
	for _, body := range []string{`null`, ` null `, `1`, `"x"`, `[]`, `true`} {
		for _, path := range []string{"/v1/admin/settings", "/v1/admin/nodes/join"} {
			method := "PUT"
			if strings.HasSuffix(path, "join") {
				method = "POST"
			}
			r := do(t, h, method, path, strings.NewReader(body), nil)
			if r.code != 400 || errCode(t, r) != "bad_request" || !strings.Contains(r.body, "JSON object") {
				t.Errorf("%s %s with body %s: %d %s, want 400 bad_request naming a JSON object", method, path, body, r.code, r.body)
			}
		}
	}
	if after := fmt.Sprintf("%+v", f.rec); after != before {
		t.Errorf("the membership record changed: %s, was %s", after, before)
	}
}
