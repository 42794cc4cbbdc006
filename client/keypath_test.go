package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// pathRecorder answers every request 201 and records the escaped path it
// was sent to.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, r.URL.EscapedPath())
	p.mu.Unlock()
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{"Etag": {`"1"`}},
		Body: io.NopCloser(strings.NewReader(`{"version":1}`)), Request: r}, nil
}

// A key "." or ".." is sent percent-encoded: as a path segment of its
// own, a node would take it for a dot segment (and refuse it) rather
// than for the key.
func TestKeyPathEscapesDotSegments(t *testing.T) {
	rec := &pathRecorder{}
	c, err := New([]string{"http://node"}, Options{HTTP: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{".": "/v1/kv/%2E", "..": "/v1/kv/%2E%2E", "...": "/v1/kv/...", "a/b": "/v1/kv/a%2Fb", "./a": "/v1/kv/.%2Fa"}
	for k, want := range keys {
		rec.paths = nil
		if _, err := c.Put(context.Background(), []byte(k), []byte("v"), PutOptions{}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
		if len(rec.paths) != 1 || rec.paths[0] != want {
			t.Errorf("key %q sent to %q, want %q", k, rec.paths, want)
		}
	}
}
