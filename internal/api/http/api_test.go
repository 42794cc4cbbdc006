package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

type resp struct {
	code int
	h    http.Header
	body string
}

func do(t *testing.T, h http.Handler, method, target string, body io.Reader, hdr map[string]string) resp {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return resp{w.Code, w.Header(), w.Body.String()}
}

// errCode checks a JSON error body and returns its code.
func errCode(t *testing.T, r resp) string {
	t.Helper()
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" || e.Message == "" {
		t.Fatalf("status %d: error body %q is not {error, message} JSON (%v)", r.code, r.body, err)
	}
	if ct := r.h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error content type %q", ct)
	}
	return e.Error
}

func TestV0EntityCRUD(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	if r := do(t, h, "GET", "/v0/status", nil, nil); r.code != 200 {
		t.Fatalf("status: %d", r.code)
	}
	if r := do(t, h, "PUT", "/v0/entity?id=a", strings.NewReader("value-a"), nil); r.code != 201 {
		t.Fatalf("put: %d %s", r.code, r.body)
	}
	if f.lastW.Ack != 0 || f.lastW.From != 0 {
		t.Fatalf("default replicas passed as %d/%d, want 0/0 (backend default)", f.lastW.Ack, f.lastW.From)
	}
	r := do(t, h, "GET", "/v0/entity?id=a", nil, nil)
	if r.code != 200 || r.body != "value-a" {
		t.Fatalf("get: %d %q", r.code, r.body)
	}
	if r := do(t, h, "GET", "/v0/entity?id=a&replicas=1/3", nil, nil); r.code != 200 || f.lastR.Ack != 1 || f.lastR.From != 3 {
		t.Fatalf("get 1/3: %d, backend saw %d/%d", r.code, f.lastR.Ack, f.lastR.From)
	}
	if r := do(t, h, "DELETE", "/v0/entity?id=a&replicas=3/3", nil, nil); r.code != 202 || f.lastW.Ack != 3 {
		t.Fatalf("delete: %d ack %d", r.code, f.lastW.Ack)
	}
	if r := do(t, h, "GET", "/v0/entity?id=a", nil, nil); r.code != 404 || errCode(t, r) != "not_found" {
		t.Fatalf("get after delete: %d", r.code)
	}
	// Deleting an absent entity is still 202 on v0.
	if r := do(t, h, "DELETE", "/v0/entity?id=never", nil, nil); r.code != 202 {
		t.Fatalf("delete absent: %d", r.code)
	}
}

func TestV0BadInputChangesNothing(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{MaxKeySize: 16})
	do(t, h, "PUT", "/v0/entity?id=k", strings.NewReader("orig"), nil)
	before := f.writeCount()
	bad := []string{
		"/v0/entity", "/v0/entity?id=", "/v0/entity?id=k&replicas=0/3", "/v0/entity?id=k&replicas=4/3",
		"/v0/entity?id=k&replicas=3/2", "/v0/entity?id=k&replicas=a/b", "/v0/entity?id=k&replicas=2",
		"/v0/entity?id=k&replicas=/3", "/v0/entity?id=k&replicas=1/", "/v0/entity?id=k&replicas=1/3/3",
		"/v0/entity?id=k&replicas=-1/3", "/v0/entity?id=k&replicas=99999999999999999999/3",
		"/v0/entity?id=k&replicas=", "/v0/entity?id=" + strings.Repeat("x", 17),
	}
	for _, target := range bad {
		for _, m := range []string{"PUT", "GET", "DELETE"} {
			r := do(t, h, m, target, strings.NewReader("changed"), nil)
			if r.code != 400 || errCode(t, r) != "bad_request" {
				t.Fatalf("%s %s: %d %s", m, target, r.code, r.body)
			}
		}
	}
	if f.writeCount() != before {
		t.Fatal("a rejected request wrote")
	}
	if r := do(t, h, "GET", "/v0/entity?id=k", nil, nil); r.body != "orig" {
		t.Fatalf("value changed to %q", r.body)
	}
	r := do(t, h, "PATCH", "/v0/entity?id=k", nil, nil)
	if r.code != 405 || r.h.Get("Allow") == "" || errCode(t, r) != "method_not_allowed" {
		t.Fatalf("PATCH: %d allow=%q", r.code, r.h.Get("Allow"))
	}
}

func TestValueLimit(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{MaxValueSize: 10})
	if r := do(t, h, "PUT", "/v1/kv/k", strings.NewReader(strings.Repeat("x", 10)), nil); r.code != 201 {
		t.Fatalf("value at the limit: %d", r.code)
	}
	r := do(t, h, "PUT", "/v1/kv/k", strings.NewReader(strings.Repeat("x", 11)), nil)
	if r.code != 413 || errCode(t, r) != "value_too_large" {
		t.Fatalf("with Content-Length: %d", r.code)
	}
	// Chunked (no Content-Length): the limit is enforced while reading.
	req := httptest.NewRequest("PUT", "/v0/entity?id=k", io.MultiReader(strings.NewReader(strings.Repeat("y", 50))))
	req.ContentLength = -1
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 413 {
		t.Fatalf("chunked: %d", w.Code)
	}
	if f.writeCount() != 1 {
		t.Fatalf("oversize values were written (%d writes)", f.writeCount())
	}
}

func TestV1ConditionalAndETag(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("1"), map[string]string{"If-None-Match": "*"})
	if r.code != 201 || r.h.Get("ETag") == "" {
		t.Fatalf("create: %d etag %q", r.code, r.h.Get("ETag"))
	}
	if _, ok := f.data["a/b"]; !ok {
		t.Fatal("escaped slash not kept inside the key")
	}
	etag := r.h.Get("ETag")
	if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("2"), map[string]string{"If-None-Match": "*"}); r.code != 412 || errCode(t, r) != "precondition_failed" {
		t.Fatalf("second create: %d", r.code)
	}
	if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("2"), map[string]string{"If-Match": `"999"`}); r.code != 412 {
		t.Fatalf("stale If-Match: %d", r.code)
	}
	r = do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("2"), map[string]string{"If-Match": etag})
	if r.code != 200 || r.h.Get("ETag") == etag {
		t.Fatalf("matching If-Match: %d etag %q", r.code, r.h.Get("ETag"))
	}
	r = do(t, h, "GET", "/v1/kv/a%2Fb", nil, nil)
	if r.code != 200 || r.body != "2" || r.h.Get("ETag") == "" {
		t.Fatalf("get: %d %q", r.code, r.body)
	}
	hr := do(t, h, "HEAD", "/v1/kv/a%2Fb", nil, nil)
	if hr.code != 200 || hr.body != "" || hr.h.Get("ETag") != r.h.Get("ETag") || hr.h.Get("Content-Length") != "1" {
		t.Fatalf("head: %d body %q etag %q len %q", hr.code, hr.body, hr.h.Get("ETag"), hr.h.Get("Content-Length"))
	}
	for _, bad := range []map[string]string{
		{"If-Match": "W/\"1\""}, {"If-Match": "abc"}, {"If-None-Match": "\"3\""},
		{"If-Match": "\"1\"", "If-None-Match": "*"}, {"Cairn-Request-Id": strings.Repeat("i", 33)},
	} {
		if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("3"), bad); r.code != 400 {
			t.Fatalf("headers %v: %d", bad, r.code)
		}
	}
	if r := do(t, h, "PUT", "/v1/kv/x", strings.NewReader("3"), map[string]string{"Cairn-Request-Id": "abc"}); r.code != 201 || string(f.lastW.RequestID) != "abc" {
		t.Fatalf("request id not passed: %d %q", r.code, f.lastW.RequestID)
	}
	// A well-formed entity tag Cairn never made is a false precondition
	// (412), not a malformed header, and changes nothing.
	for _, tag := range []string{`"no-such-version"`, `"18446744073709551616"`, `""`, `"0"`} {
		if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("4"), map[string]string{"If-Match": tag}); r.code != 412 || errCode(t, r) != "precondition_failed" {
			t.Fatalf("If-Match %s: %d %q", tag, r.code, r.body)
		}
	}
	for _, bad := range []string{`"a b"`, `"a"b"`, "\"\x01\""} {
		if r := do(t, h, "PUT", "/v1/kv/a%2Fb", strings.NewReader("4"), map[string]string{"If-Match": bad}); r.code != 400 {
			t.Fatalf("malformed If-Match %q: %d", bad, r.code)
		}
	}
	if r := do(t, h, "GET", "/v1/kv/a%2Fb", nil, nil); r.body != "2" {
		t.Fatalf("a failed precondition changed the value: %q", r.body)
	}
	if r := do(t, h, "DELETE", "/v1/kv/a%2Fb", nil, map[string]string{"If-Match": `"1"`}); r.code != 412 {
		t.Fatalf("conditional delete: %d", r.code)
	}
	if r := do(t, h, "DELETE", "/v1/kv/a%2Fb", nil, nil); r.code != 204 {
		t.Fatalf("delete: %d", r.code)
	}
	if r := do(t, h, "DELETE", "/v1/kv/a%2Fb", nil, nil); r.code != 404 {
		t.Fatalf("delete absent: %d", r.code)
	}
	if r := do(t, h, "GET", "/v1/kv/", nil, nil); r.code != 400 {
		t.Fatalf("empty key: %d", r.code)
	}
	if r := do(t, h, "POST", "/v1/kv/k", nil, nil); r.code != 405 {
		t.Fatalf("POST: %d", r.code)
	}
}

func TestConsistencyParameter(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	do(t, h, "PUT", "/v1/kv/k", strings.NewReader("v"), nil)
	if r := do(t, h, "GET", "/v1/kv/k?consistency=serializable", nil, nil); r.code != 200 || f.lastR.Consistency != kv.Serializable {
		t.Fatalf("serializable: %d %v", r.code, f.lastR.Consistency)
	}
	if r := do(t, h, "GET", "/v1/kv/k?consistency=linearizable", nil, nil); r.code != 200 || f.lastR.Consistency != kv.Linearizable {
		t.Fatalf("linearizable: %d", r.code)
	}
	if r := do(t, h, "GET", "/v1/kv/k?consistency=bogus", nil, nil); r.code != 400 {
		t.Fatalf("bogus: %d", r.code)
	}
}

func TestBackendErrorsMapToStatus(t *testing.T) {
	cases := []struct {
		err  error
		code int
		name string
	}{
		{kv.ErrTimeout, 504, "timeout"}, {kv.ErrAckTimeout, 504, "ack_timeout"},
		{kv.ErrOverloaded, 503, "overloaded"}, {fmt.Errorf("%w: shard 2", kv.ErrShardOverloaded), 503, "shard_overloaded"}, {kv.ErrStopped, 503, "stopping"}, {kv.ErrWrongShard, 503, "wrong_shard"},
		{fmt.Errorf("%w: shard 2", kv.ErrNoLeader), 503, "no_leader"},
		{kv.ErrInvalidArgument, 400, "bad_request"}, {io.ErrUnexpectedEOF, 500, "internal"},
		{fmt.Errorf("shard 3: %w", kv.ErrRequestIDReused), 409, "request_id_reused"},
	}
	for _, c := range cases {
		f := newFake()
		f.err = c.err
		h := mustNew(t, f, Config{})
		r := do(t, h, "PUT", "/v0/entity?id=k", strings.NewReader("v"), nil)
		if r.code != c.code || errCode(t, r) != c.name {
			t.Fatalf("%v: %d %s", c.err, r.code, r.body)
		}
		if c.code == 503 && r.h.Get("Retry-After") == "" {
			t.Fatalf("%v: no Retry-After", c.err)
		}
	}
}

// A write that reuses the request id of another gets 409 with a JSON
// error, and nothing is written.
func TestReusedRequestIDIsAConflict(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	id := map[string]string{"Cairn-Request-Id": "r-1"}
	if r := do(t, h, "PUT", "/v1/kv/alpha", strings.NewReader("a"), id); r.code != 201 {
		t.Fatalf("first put: %d %s", r.code, r.body)
	}
	r := do(t, h, "PUT", "/v1/kv/beta", strings.NewReader("b"), id)
	if r.code != http.StatusConflict || errCode(t, r) != "request_id_reused" || r.h.Get("ETag") != "" {
		t.Fatalf("put of another key under the same id: %d %s (ETag %q)", r.code, r.body, r.h.Get("ETag"))
	}
	if r := do(t, h, "GET", "/v1/kv/beta", nil, nil); r.code != 404 {
		t.Fatalf("beta after the refused put: %d", r.code)
	}
	if f.writeCount() != 1 {
		t.Fatalf("%d writes, want 1", f.writeCount())
	}
}

func TestInflightLimit(t *testing.T) {
	f := newFake()
	f.block = make(chan struct{})
	f.entered = make(chan struct{}, 4)
	h := mustNew(t, f, Config{MaxInflight: 2, RequestTimeout: 10 * time.Second})
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { done <- do(t, h, "GET", "/v0/entity?id=k", nil, nil).code }()
	}
	<-f.entered
	<-f.entered
	r := do(t, h, "GET", "/v0/entity?id=k", nil, nil)
	if r.code != 503 || r.h.Get("Retry-After") == "" || errCode(t, r) != "overloaded" {
		t.Fatalf("third request while two are in flight: %d", r.code)
	}
	// Status stays available while data requests are saturated.
	if r := do(t, h, "GET", "/v1/status", nil, nil); r.code != 200 {
		t.Fatalf("status while saturated: %d", r.code)
	}
	close(f.block)
	<-done
	<-done
	if r := do(t, h, "PUT", "/v0/entity?id=k", strings.NewReader("v"), nil); r.code != 201 {
		t.Fatalf("after the load drained: %d", r.code)
	}
}

func TestDeadlineGives504(t *testing.T) {
	f := newFake()
	f.block = make(chan struct{}) // never released: the request deadline ends the wait
	h := mustNew(t, f, Config{RequestTimeout: 50 * time.Millisecond})
	if r := do(t, h, "GET", "/v1/kv/k", nil, nil); r.code != 504 || errCode(t, r) != "timeout" {
		t.Fatalf("blocked backend: %d %s", r.code, r.body)
	}
}

func TestStatusClusterMetrics(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	r := do(t, h, "GET", "/v1/status", nil, nil)
	var st kv.NodeStatus
	if r.code != 200 || json.Unmarshal([]byte(r.body), &st) != nil || st.NodeID != 7 {
		t.Fatalf("status: %d %s", r.code, r.body)
	}
	if r := do(t, h, "GET", "/v1/cluster", nil, nil); r.code != 200 || !strings.Contains(r.body, `"node_id": 7`) {
		t.Fatalf("cluster: %d %s", r.code, r.body)
	}
	do(t, h, "GET", "/v0/entity?id=x", nil, nil)
	r = do(t, h, "GET", "/metrics", nil, nil)
	if r.code != 200 || !strings.Contains(r.body, `cairn_http_requests_total{code="404",method="GET",route="v0_entity"} 1`) {
		t.Fatalf("metrics: %d\n%s", r.code, r.body)
	}
	// Later requests count through the cached series.
	do(t, h, "GET", "/v0/entity?id=x", nil, nil)
	do(t, h, "PATCH", "/v0/entity?id=x", nil, nil)
	r = do(t, h, "GET", "/metrics", nil, nil)
	for _, want := range []string{`cairn_http_requests_total{code="404",method="GET",route="v0_entity"} 2`,
		`cairn_http_requests_total{code="405",method="OTHER",route="v0_entity"} 1`,
		`cairn_http_request_duration_seconds_count{method="GET",route="v0_entity"} 2`} {
		if !strings.Contains(r.body, want) {
			t.Fatalf("metrics lack %s:\n%s", want, r.body)
		}
	}
	if r := do(t, h, "GET", "/debug/pprof/", nil, nil); r.code != 200 {
		t.Fatalf("pprof: %d", r.code)
	}
	if r := do(t, h, "GET", "/nope", nil, nil); r.code != 404 || errCode(t, r) != "not_found" {
		t.Fatalf("unknown path: %d", r.code)
	}
}

func TestCleanPathMatchesTheMux(t *testing.T) {
	for p, want := range map[string]bool{
		"/v1/kv/a": true, "/v1/kv/a/b": true, "/v1/kv/a.b": true, "/v1/kv/..a": true,
		"/v1/kv/": true, "/v1/kv/a/": true, "/v1/kv//a": false, "/v1/kv/./a": false, "/v1/kv/a/..": false,
		"/v1/kv/a/../b": false, "/v1/kv/.": false,
	} {
		if got := cleanPath(p); got != want {
			t.Errorf("cleanPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestUncleanKeyPathsStillGoThroughTheMux(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	// A path that cleaning changes is not the fast route's: it is refused
	// (the mux would redirect it to another key, TestUncleanKeyPathRefused).
	if r := do(t, h, "GET", "/v1/kv/a/../b", nil, nil); r.code != http.StatusBadRequest {
		t.Fatalf("GET /v1/kv/a/../b: %d, want 400", r.code)
	}
	if r := do(t, h, "PUT", "/v1/kv/k1", strings.NewReader("v"), nil); r.code != http.StatusCreated {
		t.Fatalf("PUT through the fast route: %d %s", r.code, r.body)
	}
	// One whose dots and slashes are escaped goes through the mux to the
	// kv handler.
	if r := do(t, h, "PUT", "/v1/kv/a%2F..%2Fb", strings.NewReader("v"), nil); r.code != http.StatusCreated {
		t.Fatalf("PUT /v1/kv/a%%2F..%%2Fb: %d %s", r.code, r.body)
	}
}

func TestProtocolErrorsAreJSON(t *testing.T) {
	for status, code := range map[int]string{400: "bad_request", 413: "value_too_large", 417: "expectation_failed",
		431: "header_too_large", 501: "not_implemented", 503: "overloaded", 505: "version_not_supported"} {
		w := httptest.NewRecorder()
		WriteProtocolError(w, status, "why")
		if got := errCode(t, resp{w.Code, w.Header(), w.Body.String()}); w.Code != status || got != code {
			t.Fatalf("status %d: answered %d %q, want %q", status, w.Code, got, code)
		}
	}
}

// The debug profile runs for the seconds it is asked for even when the
// request carries a shorter deadline (the HTTP/1.1 server gives every
// request the request timeout).
func TestProfileOutlivesRequestDeadline(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/debug/pprof/profile?seconds=1", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(w, req)
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("profile of 1 s ended after %v: cut by the request's deadline", took)
	}
	if w.Code != http.StatusOK || w.Body.Len() == 0 {
		t.Fatalf("status %d, %d bytes", w.Code, w.Body.Len())
	}
}

// mustNew is New, failing the test on an invalid config.
func mustNew(t testing.TB, b Backend, cfg Config) http.Handler {
	t.Helper()
	h, err := New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	c := Config{}.EnsureDefaults()
	if c.MaxKeySize != 4096 || c.MaxValueSize != 8<<20 || c.RequestTimeout != 5*time.Second ||
		c.MaxInflight != 4096 || c.MaxScans != 1 || c.Stopping == nil || c.Logger == nil || c.Registerer == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Config{
		"MaxKeySize":     {MaxKeySize: -1},
		"MaxValueSize":   {MaxValueSize: -1},
		"RequestTimeout": {RequestTimeout: -1},
		"MaxInflight":    {MaxInflight: -3},
		"MaxScans":       {MaxScans: -1},
	} {
		if _, err := New(newFake(), bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// A request id is printable ASCII (docs/http-api.md): one with other
// bytes (a\xffb, a control character) was taken as it came, an id the
// client's own logs and another node's answers may not show as sent.
// It is 400 naming the header, on v0 and v1 writes, and nothing is
// written.
func TestRequestIDMustBePrintableASCII(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	for _, id := range []string{"a\xffb", "a\x01b", "a\tb", "é", "a\x7fb"} {
		for _, target := range []string{"/v1/kv/k", "/v0/entity?id=k"} {
			for _, method := range []string{"PUT", "DELETE"} {
				r := do(t, h, method, target, strings.NewReader("v"), map[string]string{"Cairn-Request-Id": id})
				if r.code != 400 || errCode(t, r) != "bad_request" || !strings.Contains(r.body, "Cairn-Request-Id") {
					t.Errorf("%s %s with Cairn-Request-Id %q: %d %s, want 400 naming the header", method, target, id, r.code, r.body)
				}
			}
		}
	}
	if r := do(t, h, "GET", "/v1/kv/k", nil, nil); r.code != 404 {
		t.Errorf("after the refused writes, GET: %d %s, want 404", r.code, r.body)
	}
	if r := do(t, h, "PUT", "/v1/kv/k", strings.NewReader("v"), map[string]string{"Cairn-Request-Id": "a b~!"}); r.code != 201 {
		t.Errorf("printable id with a space: %d %s", r.code, r.body)
	}
}
