package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

func TestProfileSecondsBounded(t *testing.T) {
	h := mustNew(t, newFake(), Config{})
	for _, target := range []string{
		"/debug/pprof/trace?seconds=100000", "/debug/pprof/trace?seconds=31",
		"/debug/pprof/profile?seconds=61", "/debug/pprof/profile?seconds=-1",
		"/debug/pprof/profile?seconds=x", "/debug/pprof/heap?seconds=100000",
	} {
		r := do(t, h, "GET", target, nil, nil)
		if r.code != http.StatusBadRequest || errCode(t, r) != "bad_request" {
			t.Errorf("%s: %d %q", target, r.code, r.body)
		}
	}
	if r := do(t, h, "GET", "/debug/pprof/", nil, nil); r.code != 200 {
		t.Fatalf("index: %d", r.code)
	}
}

// blockingRun is a long run that holds its token until its context ends.
func blockingRun(cfg Config) (h http.Handler, started <-chan struct{}) {
	a := &api{cfg: cfg.EnsureDefaults(), profiles: make(chan struct{}, 1)}
	ch := make(chan struct{}, 1)
	return a.profiling(func(w http.ResponseWriter, r *http.Request) {
		ch <- struct{}{}
		<-r.Context().Done()
		w.WriteHeader(http.StatusOK)
	}, 30, maxProfileSeconds), ch
}

// startRun runs h with ctx and reports when it returns.
func startRun(h http.Handler, ctx context.Context) (*httptest.ResponseRecorder, <-chan struct{}) {
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/debug/pprof/profile", nil).WithContext(ctx))
	}()
	return w, done
}

// A profile stops when its client goes (not at its request deadline), and
// only one runs at a time.
func TestProfileStopsWhenClientGoes(t *testing.T) {
	h, started := blockingRun(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	_, done := startRun(h, ctx)
	<-started
	if r := do(t, h, "GET", "/debug/pprof/profile?seconds=1", nil, nil); r.code != 503 || r.h.Get("Retry-After") == "" || errCode(t, r) != "busy" {
		t.Fatalf("second profile: %d %q retry-after %q", r.code, r.body, r.h.Get("Retry-After"))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the profile kept running after its client went")
	}
	// The token is back: a new run starts (and ends at its deadline-free
	// client's cancellation).
	ctx2, cancel2 := context.WithCancel(context.Background())
	_, done2 := startRun(h, ctx2)
	<-started
	cancel2()
	<-done2
}

// A request deadline (the request timeout every HTTP/1.1 request gets)
// does not end a profile.
func TestProfileIgnoresRequestDeadline(t *testing.T) {
	h, started := blockingRun(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, done := startRun(h, ctx)
	<-started
	<-ctx.Done()
	select {
	case <-done:
		t.Fatal("the profile ended at its request's deadline")
	case <-time.After(100 * time.Millisecond):
	}
}

// A profile stops when the node begins to stop, so shutdown never waits
// for the seconds it was asked for.
func TestProfileStopsWhenNodeStops(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	h, started := blockingRun(Config{Stopping: stopping})
	w, done := startRun(h, context.Background())
	<-started
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the profile kept running after the node began to stop")
	}
	if w.Code != http.StatusOK {
		t.Fatalf("stopped profile: %d", w.Code)
	}
}

func TestCappedWriterDropsPastItsBound(t *testing.T) {
	w := httptest.NewRecorder()
	full := 0
	c := &cappedWriter{ResponseWriter: w, left: 5, full: func() { full++ }}
	if n, err := c.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write: %d %v", n, err)
	}
	if n, err := c.Write([]byte("defg")); n != 2 || err == nil {
		t.Fatalf("write past the bound: %d %v", n, err)
	}
	if n, err := c.Write([]byte("hij")); n != 0 || err == nil {
		t.Fatalf("write after the bound: %d %v", n, err)
	}
	if w.Body.String() != "abcde" || full != 1 {
		t.Fatalf("body %q, full called %d times", w.Body.String(), full)
	}
}

// blockingHasher scans until released.
type blockingHasher struct {
	*fakeBackend
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingHasher) ShardHashes() ([]kv.ShardHash, error) {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return []kv.ShardHash{{Shard: 1}}, nil
}

func TestAdminScansBounded(t *testing.T) {
	b := &blockingHasher{fakeBackend: newFake(), started: make(chan struct{}), release: make(chan struct{})}
	h := mustNew(t, b, Config{})
	first := make(chan resp)
	go func() { first <- do(t, h, "GET", "/v1/admin/hashes", nil, nil) }()
	<-b.started
	r := do(t, h, "GET", "/v1/admin/hashes", nil, nil)
	if r.code != http.StatusServiceUnavailable || r.h.Get("Retry-After") == "" || errCode(t, r) != "busy" {
		t.Fatalf("second scan while one runs: %d %q", r.code, r.body)
	}
	close(b.release)
	if r := <-first; r.code != 200 || !strings.Contains(r.body, "shard") {
		t.Fatalf("first scan: %d %q", r.code, r.body)
	}
	if r := do(t, h, "GET", "/v1/admin/hashes", nil, nil); r.code != 200 {
		t.Fatalf("scan after the first ended: %d", r.code)
	}
}
