package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
)

// handlerTransport serves an http.Client's requests with a handler, in
// process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	sr := r.Clone(r.Context())
	sr.RequestURI = r.URL.RequestURI()
	if sr.Body == nil {
		sr.Body = http.NoBody
	}
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, sr)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// A key path with an empty, "." or ".." segment is refused with a JSON
// 400, not redirected to the path cleaned of them: a client that follows
// redirects (Go's http.Client does for a DELETE, and for a PUT whose body
// it can send again) would write, read or delete another key than the one
// it named. The same bytes percent-encoded name the key as written.
func TestUncleanKeyPathRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	f.data["b"] = kv.Value{Data: []byte("keep"), Version: 1}
	c := &http.Client{Transport: handlerTransport{h}}
	for _, tc := range []struct{ method, path string }{
		{"DELETE", "/v1/kv/a/../b"}, {"PUT", "/v1/kv//b"}, {"PUT", "/v1/kv/./b"}, {"PUT", "/v1/kv/b/."},
		{"GET", "/v1/kv/x/../b"}, {"HEAD", "/v1/kv//b"}, {"PUT", "/v1/kv/.."}, {"PUT", "/v1/kv/../admin/fault"},
	} {
		var body io.Reader
		if tc.method == "PUT" {
			body = strings.NewReader("new")
		}
		req, err := http.NewRequest(tc.method, "http://node"+tc.path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || tc.method != "HEAD" && !strings.Contains(string(b), `"error":"bad_request"`) {
			t.Errorf("%s %s: %d %q (at %s), want a JSON 400", tc.method, tc.path, resp.StatusCode, b, resp.Request.URL.Path)
		}
	}
	if v := f.data["b"]; string(v.Data) != "keep" || f.writeCount() != 0 {
		t.Fatalf("key b is now %q after %d writes; want it untouched", v.Data, f.writeCount())
	}
	if r := do(t, h, "PUT", "/v1/kv/a%2F..%2Fb", strings.NewReader("v"), nil); r.code != http.StatusCreated || string(f.data["a/../b"].Data) != "v" {
		t.Fatalf("PUT /v1/kv/a%%2F..%%2Fb: %d %s, want key a/../b written", r.code, r.body)
	}
	if r := do(t, h, "PUT", "/v1/kv/%2E%2E", strings.NewReader("v"), nil); r.code != http.StatusCreated || string(f.data[".."].Data) != "v" {
		t.Fatalf("PUT /v1/kv/%%2E%%2E: %d %s, want key .. written", r.code, r.body)
	}
}
