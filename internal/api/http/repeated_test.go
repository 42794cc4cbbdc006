package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A header field or query parameter that means one value, given twice,
// was read as its first value: a write carrying If-Match "1" and
// If-Match "2" was made on condition of the first only, id=a&id=b wrote
// key a, replicas= and limit= took the first. The client (or a proxy
// that added one) meant something the node cannot know. Each is 400
// naming the field, before anything is read or written.
func TestRepeatedFieldsAreRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	if r := do(t, h, "PUT", "/v1/kv/k", strings.NewReader("v1"), nil); r.code != 201 {
		t.Fatalf("PUT k: %d %s", r.code, r.body)
	}
	for _, c := range []struct {
		method, target string
		header         http.Header
		name           string
	}{
		{"PUT", "/v1/kv/k", http.Header{"If-Match": {`"1"`, `"2"`}}, "If-Match"},
		{"PUT", "/v1/kv/k", http.Header{"If-None-Match": {"*", "*"}}, "If-None-Match"},
		{"DELETE", "/v1/kv/k", http.Header{"If-Match": {`"1"`, `"1"`}}, "If-Match"},
		{"PUT", "/v1/kv/k", http.Header{"Cairn-Request-Id": {"a", "b"}}, "Cairn-Request-Id"},
		{"PUT", "/v1/kv/k", http.Header{"Authorization": {"Bearer x", "Bearer y"}}, "Authorization"},
		{"PUT", "/v0/entity?id=k&id=other", nil, "id"},
		{"DELETE", "/v0/entity?id=k&id=k", nil, "id"},
		{"PUT", "/v1/kv/k?replicas=1/1&replicas=3/3", nil, "replicas"},
		{"GET", "/v1/kv?limit=1&limit=1000", nil, "limit"},
		{"GET", "/v1/kv?prefix=a&prefix=k", nil, "prefix"},
		{"GET", "/v1/kv/k?consistency=stale&consistency=linearizable", nil, "consistency"},
		{"POST", "/v1/admin/tokens?role=read&role=admin", nil, "role"},
	} {
		req := httptest.NewRequest(c.method, c.target, strings.NewReader("v2"))
		for k, vs := range c.header {
			req.Header[k] = vs
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		r := resp{w.Code, w.Header(), w.Body.String()}
		if r.code != 400 || errCode(t, r) != "bad_request" || !strings.Contains(r.body, c.name) {
			t.Errorf("%s %s %v: %d %s, want 400 bad_request naming %s", c.method, c.target, c.header, r.code, r.body, c.name)
		}
	}
	if r := do(t, h, "GET", "/v1/kv/k", nil, nil); r.code != 200 || r.body != "v1" {
		t.Errorf("after the refused requests, k: %d %q, want v1", r.code, r.body)
	}
	if _, ok := f.data["other"]; ok {
		t.Error("key other was written")
	}
	// Different parameters, and one value each, are served as before.
	if r := do(t, h, "GET", "/v1/kv?prefix=k&limit=1", nil, nil); r.code != 200 {
		t.Errorf("GET /v1/kv?prefix=k&limit=1: %d %s", r.code, r.body)
	}
}

// RefuseRepeated does the same in front of any handler (the node puts
// it in front of token checks, which read Authorization and the token
// routes' role and ttl).
func TestRefuseRepeatedWrapsAnyHandler(t *testing.T) {
	called := false
	h := RefuseRepeated(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	for _, c := range []struct {
		target string
		header http.Header
		name   string
	}{
		{"/v1/admin/tokens?role=read&ttl=1h&role=admin", nil, "role"},
		{"/v1/admin/tokens?role=read&ttl=1h&ttl=2h", nil, "ttl"},
		{"/v1/kv/k", http.Header{"Authorization": {"Bearer x", "Bearer y"}}, "Authorization"},
	} {
		called = false
		req := httptest.NewRequest("POST", c.target, nil)
		for k, vs := range c.header {
			req.Header[k] = vs
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		r := resp{w.Code, w.Header(), w.Body.String()}
		if called || r.code != 400 || errCode(t, r) != "bad_request" || !strings.Contains(r.body, c.name) {
			t.Errorf("%s %v: handler called %v, %d %s, want 400 naming %s", c.target, c.header, called, r.code, r.body, c.name)
		}
	}
	req := httptest.NewRequest("POST", "/v1/admin/tokens?role=read&ttl=1h", nil)
	req.Header.Set("Authorization", "Bearer x")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !called {
		t.Error("a request without repeated fields was not served")
	}
}

// repeatedParam compares names unescaped, as url.ParseQuery reads them,
// counts long queries too, and reads a short one without allocating (it
// runs on every request).
func TestRepeatedParam(t *testing.T) {
	long := strings.Repeat("a=1&", 20) + "b=2"
	for _, c := range []struct {
		raw  string
		name string
		n    int
	}{
		{"id=a&replicas=2/3", "", 0},
		{"id=a", "", 0},
		{"id=a&id=b", "id", 2},
		{"i%64=a&id=b", "id", 2},
		{"a+b=1&a%20b=2&x=3", "a b", 2},
		{"x=1&&y=2&y=3&y=4", "y", 3},
		{long, "a", 20},
	} {
		if name, n := repeatedParam(c.raw); name != c.name || n != c.n && c.n > 1 || c.n == 0 && n > 1 {
			t.Errorf("repeatedParam(%q) = %q, %d; want %q, %d", c.raw, name, n, c.name, c.n)
		}
	}
	if a := testing.AllocsPerRun(100, func() { repeatedParam("id=a&replicas=2/3&x=1") }); a != 0 {
		t.Errorf("%v allocations for a query of three parameters, want 0", a)
	}
}
