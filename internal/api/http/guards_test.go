package httpapi

// Guards of docs/http-api.md and docs/security.md: a bad request changes
// nothing, the system keys stay out of listings, errors are JSON.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// A request the fault hook answers 400 must not have applied any fault
// ("a bad request never changes" anything).
func TestFaultHookBadParamAppliesNothing(t *testing.T) {
	ff := &fakeFaults{}
	h := mustNew(t, newFake(), Config{Faults: ff})
	r := do(t, h, "POST", "/v1/admin/fault?partition=2,3&disk-stall=bogus", nil, nil)
	if r.code != 400 {
		t.Fatalf("status %d %s, want 400", r.code, r.body)
	}
	if len(ff.calls) != 0 {
		t.Fatalf("answered 400, yet the hook was called: %q (node 2 and 3 are now partitioned)", ff.calls)
	}
}

// The key of /v1/kv/{key} is the rest of the path after /v1/kv/. A path
// whose /v1/kv/ prefix carries a percent-encoded unreserved character
// (RFC 3986 §6.2.2.2: equivalent) is routed to the kv handler; it is
// refused, never stored under another key than the one routed and
// authorised.
func TestEncodedKVPrefixRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	r := do(t, h, "PUT", "/v1/k%76/x", strings.NewReader("v"), nil)
	if r.code != 400 || len(f.data) != 0 {
		var keys []string
		for k := range f.data {
			keys = append(keys, k)
		}
		t.Fatalf("PUT /v1/k%%76/x: %d %s, wrote keys %q; want 400 and nothing written", r.code, r.body, keys)
	}
	if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("v"), nil); r.code != 201 || f.data["a/b"].Data == nil {
		t.Fatalf("PUT /v1/kv/a%%2Fb: %d %s, want key a/b written", r.code, r.body)
	}
}

// oneNode is a real single-node coordinator over Pebble (as the kv
// package's tests build them).
func oneNode(t *testing.T) *kv.Coordinator {
	t.Helper()
	m, err := shard.Bootstrap([]uint64{1}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 4 << 20, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.New(store.Config{NodeID: 1, Engine: eng, Map: m, TickInterval: 10 * time.Millisecond,
		BalanceInterval: -1, Replica: replica.Config{}, Logger: logger}, true)
	if err != nil {
		t.Fatal(err)
	}
	a := &memAdapter{st: st}
	tr := transport.NewNetwork().Join(1, a, st.Unreachable)
	st.SetTransport(tr)
	c, err := kv.New(kv.Config{NodeID: 1, HTTPAddr: "http-1", Peers: map[uint64]string{1: "mem-1"}, Replication: 1,
		Map: m, Store: st, Transport: tr, DefaultTimeout: 5 * time.Second, Logger: logger, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	a.coord = c
	st.Start(true)
	t.Cleanup(func() { st.Stop(); _ = eng.Close() })
	return c
}

type memAdapter struct {
	st    *store.Store
	coord *kv.Coordinator
}

func (a *memAdapter) HandleRaft(envs []transport.Envelope) { a.st.HandleRaft(envs) }
func (a *memAdapter) HandleSnapshot(ctx context.Context, env transport.Envelope, next func() ([]byte, error)) error {
	return a.st.HandleSnapshot(ctx, env, next)
}
func (a *memAdapter) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	return a.coord.HandleRequest(ctx, req)
}

// docs/http-api.md, "Reserved keys": keys beginning with 0x00 are
// Cairn's own; "listings skip them". docs/security.md: "The system keys
// (first byte 0) are refused on the data routes whatever the role." With
// --auth the system keys include the token records (role, SHA-256,
// creation time of every token, the admin one included): no listing may
// show them, and a listing that names them is refused.
func TestListingSkipsSystemKeys(t *testing.T) {
	c := oneNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	authn := auth.New(kv.ValueStore{C: c})
	var admin string
	for {
		var err error
		if admin, err = authn.Bootstrap(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("bootstrap: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = admin
	reader, err := authn.Create(ctx, auth.RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	api := mustNew(t, c, Config{})
	h := authn.Middleware(api, &auth.Counters{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	bearer := map[string]string{"Authorization": "Bearer " + reader}
	if r := do(t, h, "PUT", "/v1/kv/user-key", strings.NewReader("v"), map[string]string{"Authorization": "Bearer " + admin}); r.code != 201 {
		t.Fatalf("put: %d %s", r.code, r.body)
	}
	for _, target := range []string{"/v1/kv?prefix=%00sys/auth/", "/v1/kv?start=%00", "/v1/kv?end=%00z"} {
		if r := do(t, h, "GET", target, nil, bearer); r.code != 400 || !strings.Contains(r.body, "reserved_key") {
			t.Errorf("GET %s: %d %s, want 400 reserved_key", target, r.code, r.body)
		}
	}
	for _, target := range []string{"/v1/kv", "/v1/kv?limit=1", "/v1/kv?start="} {
		r := do(t, h, "GET", target, nil, bearer)
		if r.code != 200 {
			t.Fatalf("GET %s: %d %s", target, r.code, r.body)
		}
		var ans struct {
			Entries []struct {
				Key   string `json:"key"`
				Value []byte `json:"value"`
			}
		}
		if err := json.Unmarshal([]byte(r.body), &ans); err != nil {
			t.Fatalf("%s: %v in %s", target, err, r.body)
		}
		var leaked []string
		for _, e := range ans.Entries {
			if strings.HasPrefix(e.Key, "\x00") {
				leaked = append(leaked, fmt.Sprintf("%q=%s", e.Key, e.Value))
			}
		}
		if len(leaked) > 0 {
			t.Errorf("GET %s with a read token (status %d) listed system keys:\n  %s", target, r.code, strings.Join(leaked, "\n  "))
		}
		if len(ans.Entries) == 0 || ans.Entries[0].Key != "user-key" {
			t.Errorf("GET %s: %s, want user-key first", target, r.body)
		}
	}
}

// docs/http-api.md: "Errors are JSON ... with Content-Type:
// application/json", an unknown profile under /debug/pprof/ too.
func TestPprofErrorIsJSON(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	for _, target := range []string{"/debug/pprof/no-such-profile", "/debug/pprof/heap?debug=x"} {
		r := do(t, h, "GET", target, nil, nil)
		if r.code < 400 {
			continue
		}
		if ct := r.h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: %d with Content-Type %q, body %q; want a JSON error", target, r.code, ct, r.body)
		}
	}
}

// A malformed JSON body (a valid object followed by garbage, or a
// truncated body) is refused with 400 and changes nothing.
func TestSettingsMalformedBodyChangesNothing(t *testing.T) {
	f := &fakeMembers{rec: cluster.Bootstrap(map[uint64]string{1: "p1", 2: "p2", 3: "p3"})}
	h := mustNew(t, newFake(), Config{Members: f})
	r := do(t, h, "PUT", "/v1/admin/settings", strings.NewReader(`{"rebalance":false}{"rebalance":true`), nil)
	rec, _, _ := f.Nodes(context.Background())
	if r.code != 400 || rec.Settings.Rebalance != nil {
		t.Fatalf("malformed body: status %d %s; settings now rebalance=%v, want 400 and unchanged", r.code, strings.TrimSpace(r.body), fmt.Sprint(rec.Settings.Rebalance != nil && *rec.Settings.Rebalance))
	}
}
