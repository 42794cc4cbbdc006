package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every answer of the API to a path it does not serve as sent is a JSON
// error: the server's mux would otherwise answer an asterisk target
// with an empty 400, a path missing its subtree's slash (/v1/index) with
// a 307 and an HTML body, and a path with an empty, "." or ".." segment
// outside the key and index routes with a redirect to another path.
func TestUnservedPathsAnswerJSON(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	for _, tc := range []struct {
		method, target string
		status         int
	}{
		{"OPTIONS", "*", http.StatusBadRequest},
		{"GET", "*", http.StatusBadRequest},
		{"GET", "/v1/index", http.StatusNotFound},
		{"GET", "/v1/admin/shards", http.StatusNotFound},
		{"GET", "/v1/admin/backup/shards", http.StatusNotFound},
		{"GET", "/debug/pprof", http.StatusNotFound},
		{"GET", "/v1//cluster", http.StatusBadRequest},
		{"GET", "//v1/cluster", http.StatusBadRequest},
		{"POST", "/v1/admin/nodes/1/../2/remove", http.StatusBadRequest},
		{"GET", "/v1/status/.", http.StatusBadRequest},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
		var body struct{ Error, Message string }
		err := json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != tc.status || w.Header().Get("Content-Type") != "application/json" || err != nil || body.Error == "" {
			t.Errorf("%s %s: %d %q %q, want a JSON %d", tc.method, tc.target, w.Code, w.Header().Get("Content-Type"), w.Body.String(), tc.status)
		}
	}
	// The paths as served still work.
	for _, p := range []string{"/v1/cluster", "/v1/status", "/v0/status"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, w.Code, w.Body)
		}
	}
}

// A query string that does not parse (a bad escape, a semicolon) is
// refused: the parameters after the bad pair were dropped, so
// "?prefix=a;b" listed every key and "?replicas=%zz" wrote with the
// default replicas, where the client had asked for something else.
func TestMalformedQueryRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	for _, tc := range []struct{ method, target string }{
		{"PUT", "/v1/kv/q?replicas=%zz"},
		{"PUT", "/v0/entity?id=q&replicas=1/3;x"},
		{"DELETE", "/v0/entity?id=%zz"},
		{"GET", "/v1/kv?prefix=a;b"},
		{"GET", "/v1/kv?limit=%zz"},
		{"GET", "/v1/kv/a?consistency=%zz"},
		{"GET", "/v1/index/n_int/1?max_results=%zz"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, strings.NewReader("v")))
		var body struct{ Error, Message string }
		err := json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != http.StatusBadRequest || err != nil || body.Error != "bad_request" || !strings.Contains(body.Message, "query") {
			t.Errorf("%s %s: %d %q, want a JSON 400 naming the query", tc.method, tc.target, w.Code, w.Body)
		}
	}
	if len(f.data) != 0 {
		t.Fatalf("a refused request wrote: %v", f.data)
	}
}

// v0 writes have no conditions: an If-Match or If-None-Match sent to
// them is refused rather than ignored, which wrote over a value the
// client meant to keep (RFC 9110 has an origin server evaluate If-Match
// before it performs the method, or not perform it).
func TestV0ConditionalWriteRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	put := func(target, value string, hdr ...string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("PUT", target, strings.NewReader(value))
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		h.ServeHTTP(w, r)
		return w
	}
	if w := put("/v1/kv/k", "keep"); w.Code != http.StatusCreated {
		t.Fatalf("put: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct{ method, name, value string }{
		{"PUT", "If-Match", `"999"`}, {"PUT", "If-None-Match", "*"}, {"DELETE", "If-Match", `"999"`},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(tc.method, "/v0/entity?id=k", strings.NewReader("lost"))
		r.Header.Set(tc.name, tc.value)
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.name) {
			t.Errorf("%s /v0/entity with %s: %d %s, want a JSON 400 naming it", tc.method, tc.name, w.Code, w.Body)
		}
	}
	if v := f.data["k"]; string(v.Data) != "keep" {
		t.Fatalf("the key holds %q after refused conditional writes", v.Data)
	}
}
