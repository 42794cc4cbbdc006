package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSleep replaces sleep for a test: it records every wait and returns
// at once (false when ctx has ended, as sleep does).
func fakeSleep(t *testing.T) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	old := sleep
	sleep = func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err() == nil
	}
	t.Cleanup(func() { sleep = old })
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

// refusingCairn is fakeCairn behind a refusal every third request: 503
// with Retry-After (when retryAfter is set), the request not served.
type refusingCairn struct {
	f          *fakeCairn
	retryAfter string
	n          atomic.Int64
	mu         sync.Mutex
	refused    map[string]int // by method, and "index" for 2i queries
}

func (s *refusingCairn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.n.Add(1)%3 == 0 {
		kind := r.Method
		if strings.HasPrefix(r.URL.Path, "/v1/index/") {
			kind = "index"
		}
		s.mu.Lock()
		s.refused[kind]++
		s.mu.Unlock()
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
		return
	}
	s.f.ServeHTTP(w, r)
}

// A 503 is waited out (Retry-After's seconds, up to a tenth more) and
// the operation tried again: every kind of the nhs workload, refused
// counted per kind, no errors, and every operation still completes.
func TestRefusalsAreWaitedOutAndCounted(t *testing.T) {
	for _, c := range []struct {
		name, header string
		fixed        time.Duration // RunConfig.RetryWait
		want         time.Duration // the preload's wait
		lo, hi       time.Duration // the run's
	}{
		{"retry-after", "2", 0, 2 * time.Second, 2 * time.Second, 2200 * time.Millisecond},
		{"none", "", 0, defaultRetryWait, defaultRetryWait, defaultRetryWait + defaultRetryWait/10},
		{"retry-wait", "2", 100 * time.Millisecond, 2 * time.Second, 50 * time.Millisecond, 150 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			waits := fakeSleep(t)
			f := &fakeCairn{t: t, objects: map[string]int{}, methods: map[string]int{}}
			s := &refusingCairn{f: f, retryAfter: c.header, refused: map[string]int{}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			d, err := NewDriver(DriverConfig{Target: srv.URL, Conns: 1, Route: RouteFixed})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			w, err := NewWorkload(Params{Workload: "nhs", Keys: 100, Mix: map[string]int{"get": 30, "head_get": 30, "update": 20, "insert": 10, "index_query": 10}})
			if err != nil {
				t.Fatal(err)
			}
			// The preload waits out refusals too, without counting them.
			if n, err := Preload(context.Background(), d, w, 2, 5*time.Second); err != nil || n != 100 {
				t.Fatalf("preload: %d, %v", n, err)
			}
			preloadWaits := len(waits())
			s.mu.Lock()
			clear(s.refused)
			s.mu.Unlock()
			run, err := Run(context.Background(), d, w, RunConfig{Clients: 1, Conns: 1, Total: 600, RetryWait: c.fixed})
			if err != nil {
				t.Fatal(err)
			}
			if run.All.Ops != 600 || run.All.Errors != 0 {
				t.Fatalf("%d ops, %d errors %v; want 600, 0", run.All.Ops, run.All.Errors, run.All.ErrorKinds)
			}
			s.mu.Lock()
			sent := s.refused[http.MethodGet] + s.refused[http.MethodHead] + s.refused[http.MethodPut] + s.refused["index"]
			byKind := map[string]int{"PUT": s.refused[http.MethodPut], "HEAD": s.refused[http.MethodHead], "index": s.refused["index"]}
			s.mu.Unlock()
			if run.All.Refused != uint64(sent) || sent < 150 {
				t.Fatalf("refused %d, the server refused %d", run.All.Refused, sent)
			}
			var sum, retried uint64
			for name, o := range run.Operations {
				if o.Refused == 0 || o.Retried == 0 || o.Retried > o.Refused || o.Errors != 0 {
					t.Fatalf("%s: %d refused, %d retried, %d errors", name, o.Refused, o.Retried, o.Errors)
				}
				sum += o.Refused
				retried += o.Retried
			}
			for kind, n := range byKind {
				if n == 0 {
					t.Fatalf("no %s request was refused: %v", kind, byKind)
				}
			}
			if sum != run.All.Refused || retried != run.All.Retried {
				t.Fatalf("per kind %d refused, %d retried; in all %d, %d", sum, retried, run.All.Refused, run.All.Retried)
			}
			ws := waits()
			if len(ws)-preloadWaits != sent {
				t.Fatalf("%d waits for %d refusals", len(ws)-preloadWaits, sent)
			}
			for i, wait := range ws {
				if i < preloadWaits && wait != c.want || i >= preloadWaits && (wait < c.lo || wait > c.hi) {
					t.Fatalf("wait %d: %v, want %v in the preload, %v to %v in the run", i, wait, c.want, c.lo, c.hi)
				}
			}
		})
	}
}

// The HTTP/1.1 closed loop waits out a 503 and sends the request again:
// counted as refused, not as an error, and the operation completes.
func TestLoopWaitsOutRefusals(t *testing.T) {
	waits := fakeSleep(t)
	var n, refused atomic.Int64
	s := &kvServer{data: map[string]string{}, answer: func(*http.Request) int {
		if n.Add(1)%10 == 0 {
			refused.Add(1)
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	d := loopDriver(t, serveKV(t, s), 1, 16, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 8, Conns: 1, Total: 500})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops != 500 || run.All.Errors != 0 || run.All.Refused != uint64(refused.Load()) || refused.Load() < 50 {
		t.Fatalf("%d ops, %d errors, %d refused; the server refused %d", run.All.Ops, run.All.Errors, run.All.Refused, refused.Load())
	}
	for _, wait := range waits() {
		if wait < defaultRetryWait || wait > defaultRetryWait+defaultRetryWait/10 {
			t.Fatalf("waited %v, want %v to a tenth more", wait, defaultRetryWait)
		}
	}
	if len(waits()) != int(refused.Load()) {
		t.Fatalf("%d waits for %d refusals", len(waits()), refused.Load())
	}
}

func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{"1": time.Second, " 3 ": 3 * time.Second, "": 0, "-1": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0} {
		if got := parseRetryAfter(in); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
