package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode answers with the status its handler chooses and records what
// it received.
type fakeNode struct {
	mu    sync.Mutex
	ids   []string
	paths []string
	srv   *httptest.Server
}

func newFakeNode(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *fakeNode {
	f := &fakeNode{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.ids = append(f.ids, r.Header.Get("Cairn-Request-Id"))
		f.paths = append(f.paths, r.URL.EscapedPath())
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func jsonErr(w http.ResponseWriter, code int, name string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write([]byte(`{"error":"` + name + `","message":"m"}`))
}

func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return "http://" + a
}

func TestRetriesMoveToAnotherNodeWithTheSameRequestID(t *testing.T) {
	busy := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		jsonErr(w, 503, "overloaded")
	})
	good := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"42"`)
		w.WriteHeader(201)
	})
	c, _ := New([]string{deadAddr(t), busy.srv.URL, good.srv.URL}, Options{Timeout: 5 * time.Second})
	var v uint64
	var err error
	for i := 0; i < 3; i++ { // whichever node the rotation starts on
		v, err = c.Put(context.Background(), []byte("k"), []byte("v"), PutOptions{})
		if err != nil || v != 42 {
			t.Fatalf("put: %d %v", v, err)
		}
	}
	busy.mu.Lock()
	defer busy.mu.Unlock()
	good.mu.Lock()
	defer good.mu.Unlock()
	if len(busy.ids) == 0 {
		t.Fatal("the busy node was never tried")
	}
	// Every attempt of one Put carries one id; the node that succeeded
	// saw the id the busy node saw for the same operation.
	seen := map[string]bool{}
	for _, id := range busy.ids {
		if id == "" {
			t.Fatal("write without a request id")
		}
		seen[id] = true
	}
	matched := false
	for _, id := range good.ids {
		matched = matched || seen[id]
	}
	if !matched {
		t.Fatalf("retries changed the request id: busy %v good %v", busy.ids, good.ids)
	}
}

func TestDefiniteAnswersAreNotRetried(t *testing.T) {
	for _, c := range []struct {
		code int
		name string
		want error
	}{{404, "not_found", ErrNotFound}, {412, "precondition_failed", ErrPreconditionFailed}, {400, "bad_request", ErrBadRequest},
		{409, "request_id_reused", ErrRequestIDReused}} {
		n := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) { jsonErr(w, c.code, c.name) })
		cl, _ := New([]string{n.srv.URL, n.srv.URL}, Options{})
		err := cl.Delete(context.Background(), []byte("k"), 3)
		var e *Error
		if !errors.Is(err, c.want) || !errors.As(err, &e) || e.Code != c.name {
			t.Fatalf("%d: %v", c.code, err)
		}
		if len(n.ids) != 1 {
			t.Fatalf("%d retried %d times", c.code, len(n.ids)-1)
		}
	}
}

func TestDeadlineIsRespected(t *testing.T) {
	n := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) { jsonErr(w, 504, "timeout") })
	c, _ := New([]string{n.srv.URL}, Options{Timeout: 200 * time.Millisecond})
	_, err := c.Put(context.Background(), []byte("k"), nil, PutOptions{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	if len(n.ids) < 2 {
		t.Fatalf("a 504 timeout was not retried (%d attempts)", len(n.ids))
	}
	ack := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) { jsonErr(w, 504, "ack_timeout") })
	c, _ = New([]string{ack.srv.URL}, Options{Timeout: time.Second})
	if _, err := c.Put(context.Background(), []byte("k"), nil, PutOptions{}); !errors.Is(err, ErrTimeout) || len(ack.ids) != 1 {
		t.Fatalf("ack_timeout: %v after %d attempts", err, len(ack.ids))
	}
}

func TestKeyEscapingAndVersions(t *testing.T) {
	n := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-Match") != `"7"` && r.Method == "PUT" {
			jsonErr(w, 400, "bad_request")
			return
		}
		w.Header().Set("ETag", `"8"`)
		w.Write([]byte("val"))
	})
	c, _ := New([]string{n.srv.URL}, Options{})
	key := []byte("a/b%c d\xff")
	if _, err := c.Put(context.Background(), key, []byte("x"), PutOptions{IfVersion: 7}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(context.Background(), key, true)
	if err != nil || string(got.Value) != "val" || got.Version != 8 {
		t.Fatalf("get: %+v %v", got, err)
	}
	for _, p := range n.paths {
		if !strings.HasPrefix(p, "/v1/kv/a%2Fb%25c%20d%FF") {
			t.Fatalf("key sent as %q", p)
		}
	}
}

// A write is retried under its request id no longer than the write retry
// window, however long the operation timeout: nodes remember a request id
// for a bounded time. Reads keep the whole timeout.
func TestWritesRetryOnlyWithinTheWindow(t *testing.T) {
	n := newFakeNode(t, func(w http.ResponseWriter, r *http.Request) { jsonErr(w, 503, "overloaded") })
	c, _ := New([]string{n.srv.URL}, Options{Timeout: time.Hour, WriteRetryWindow: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := c.Put(context.Background(), []byte("k"), nil, PutOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write was retried past its window")
	}
	n.mu.Lock()
	ids := append([]string(nil), n.ids...)
	n.mu.Unlock()
	if len(ids) < 2 {
		t.Fatalf("%d attempts: the write was not retried", len(ids))
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("retries changed the request id: %v", ids)
		}
	}
	// A window above the maximum is clamped to it.
	c, _ = New([]string{n.srv.URL}, Options{Timeout: time.Hour, WriteRetryWindow: time.Hour})
	if c.opts.WriteRetryWindow != MaxWriteRetryWindow {
		t.Fatalf("window %v, want %v", c.opts.WriteRetryWindow, MaxWriteRetryWindow)
	}
}
