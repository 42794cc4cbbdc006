package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func FuzzParseReplicas(f *testing.F) {
	for _, s := range []string{"2/3", "1/1", "0/3", "4/3", "3/2", "a/b", "2", "/3", "1/", "1/3/3", "", "01/3", "+1/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ack, from, err := ParseReplicas(s, 3)
		if err == nil && !(1 <= ack && ack <= from && from <= 3) {
			t.Fatalf("%q accepted as %d/%d", s, ack, from)
		}
	})
}

var allowed = map[int]bool{200: true, 201: true, 202: true, 204: true, 400: true, 404: true, 405: true, 412: true, 413: true}

func FuzzHandler(f *testing.F) {
	f.Add("PUT", "/v0/entity", "id=k&replicas=2/3", "", "value")
	f.Add("GET", "/v1/kv/a%2Fb", "consistency=serializable", `"3"`, "")
	f.Add("DELETE", "/v1/kv/x", "", "*", "")
	f.Add("PATCH", "/v0/entity", "id=", "", "")
	f.Add("GET", "/v1/kv", "prefix=a&limit=3&continuation=YQ&keys_only=true", "", "")
	f.Add("GET", "/v1/index/age_int", "start=-1&end=9&max_results=2&return_terms=true", "", "")
	f.Add("GET", "/v1/index/e_bin/x%00y", "continuation=AA", "", "")
	f.Fuzz(func(t *testing.T, method, path, query, cond, body string) {
		if method == "" || !validToken(method) || strings.Contains(path, "debug") {
			return // pprof's profile and trace endpoints run for seconds by design
		}
		fb := newFake()
		fb.data["k"] = fb.data["k"]
		h := mustNew(t, fb, Config{MaxKeySize: 64, MaxValueSize: 256, RequestTimeout: time.Second})
		u := &url.URL{Path: "/" + path, RawQuery: query}
		req, err := http.NewRequest(method, u.String(), bytes.NewReader([]byte(body)))
		if err != nil {
			return
		}
		req.Header.Set("If-Match", cond)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req) // must not panic
		if w.Code >= 400 {
			if !allowed[w.Code] {
				t.Fatalf("%s %s: unexpected status %d", method, u, w.Code)
			}
			var e struct{ Error string }
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%s %s: status %d with body %q", method, u, w.Code, w.Body.String())
			}
			if fb.writeCount() != 0 {
				t.Fatalf("%s %s: answered %d but wrote", method, u, w.Code)
			}
		}
	})
}

func validToken(s string) bool {
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || c == '(' || c == ')' || c == '/' || c == ',' || c == ':' || c == '"' {
			return false
		}
	}
	return true
}
