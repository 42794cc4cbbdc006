package bench

import (
	"context"
	"math/rand"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// indexServer answers every request 204 and keeps the index headers of
// each PUT.
type indexServer struct {
	mu   sync.Mutex
	puts []http.Header
	gets int
}

func (s *indexServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if r.Method == http.MethodPut {
		h := http.Header{}
		for k, v := range r.Header {
			if strings.HasPrefix(k, "X-Cairn-Index-") {
				h[k] = v
			}
		}
		s.puts = append(s.puts, h)
	} else {
		s.gets++
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func TestIndexTermsOnEveryWrite(t *testing.T) {
	bin := regexp.MustCompile(`^t[0-9]{5}$`)
	for _, tc := range []struct {
		workload string
		pipeline int
	}{{"put", 1}, {"put", 8}, {"entity", 1}, {"entity", 8}} {
		t.Run(tc.workload+"/pipeline-"+strconv.Itoa(tc.pipeline), func(t *testing.T) {
			s := &indexServer{}
			d := loopDriver(t, serveHTTP1(t, s), 2, tc.pipeline, false)
			w, err := NewWorkload(Params{Workload: tc.workload, Keys: 100, ValSize: 16, IndexTerms: 2,
				Mix: map[string]int{"put": 3, "get": 1}})
			if err != nil {
				t.Fatal(err)
			}
			run, err := Run(context.Background(), d, w, RunConfig{Clients: 4, Conns: 2, Total: 400})
			if err != nil {
				t.Fatal(err)
			}
			if run.All.Errors != 0 {
				t.Fatalf("%d errors", run.All.Errors)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.puts) == 0 {
				t.Fatal("no PUT reached the server")
			}
			for i, h := range s.puts {
				if len(h) != 2 {
					t.Fatalf("PUT %d carried index headers %v, want two", i, h)
				}
				if v := h.Get("X-Cairn-Index-bench0_bin"); !bin.MatchString(v) {
					t.Fatalf("PUT %d: bench0_bin %q", i, v)
				}
				if _, err := strconv.Atoi(h.Get("X-Cairn-Index-bench1_int")); err != nil {
					t.Fatalf("PUT %d: bench1_int %q", i, h.Get("X-Cairn-Index-bench1_int"))
				}
			}
		})
	}
}

func TestIndexTermsOnlyWhereTheyApply(t *testing.T) {
	for _, p := range []Params{
		{Workload: "range", IndexTerms: 2},
		{Workload: "ycsb-a", IndexTerms: 1},
		{Workload: "put", IndexTerms: MaxIndexTerms + 1},
		{Workload: "put", IndexTerms: -1},
	} {
		if _, err := NewWorkload(p); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	w, err := NewWorkload(Params{Workload: "put", IndexTerms: 0})
	if err != nil {
		t.Fatal(err)
	}
	if op := w.Next(rand.New(rand.NewSource(1))); op.Index != nil {
		t.Fatalf("put without --index-terms carries %v", op.Index)
	}
}
