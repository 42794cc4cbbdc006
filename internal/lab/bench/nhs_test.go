package bench

import (
	"context"
	"math"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNHSProportionsObjectsAndTerms(t *testing.T) {
	w, err := NewWorkload(Params{Workload: "nhs", Keys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := proportions(t, w, 100000)
	for op, per := range NHSMix {
		if math.Abs(got[op]-float64(per)/1000) > 0.006 {
			t.Fatalf("%s: %.4f of the operations, want %.3f", op, got[op], float64(per)/1000)
		}
	}
	if got["index_query"] == 0 || got["index_query"] >= 0.01 {
		t.Fatalf("2i queries are %.4f of the operations, want under 1 %%", got["index_query"])
	}
	r := rand.New(rand.NewSource(7))
	for range 2000 {
		op := w.Next(r)
		switch op.Kind {
		case KindPutIndexed:
			if n := len(op.Value); n < 4<<10 || n > 16<<10 {
				t.Fatalf("%s of %d bytes, want 4–16 KiB", op.Name, n)
			}
			if n := len(op.Index); n < 2 || n > 3 {
				t.Fatalf("%s with %d index terms, want 2 or 3: %v", op.Name, n, op.Index)
			}
			for _, term := range op.Index {
				if term[0] == nhsDOB {
					if _, err := strconv.Atoi(term[1]); err != nil || len(term[1]) != 8 {
						t.Fatalf("dob term %q is not yyyymmdd", term[1])
					}
				}
			}
		case KindIndexRange:
			if op.Start >= op.End || op.Limit != nhsPage || string(op.Key) != nhsDOB {
				t.Fatalf("bad range query %+v", op)
			}
		}
	}
}

// fakeCairn answers the nhs workload's requests and checks their shape.
type fakeCairn struct {
	mu       sync.Mutex
	t        *testing.T
	objects  map[string]int // key -> index terms it was written with
	methods  map[string]int
	lastHead string // the key of the last HEAD, which the next GET must read
	bad      []string
}

func (f *fakeCairn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.methods[r.Method]++
	key := strings.TrimPrefix(r.URL.Path, "/v1/kv/")
	switch {
	case r.Method == http.MethodPut:
		n := 0
		for name, vs := range r.Header {
			if strings.HasPrefix(name, "X-Cairn-Index-") {
				n += len(strings.Split(vs[0], ","))
			}
		}
		if n < 2 || n > 3 {
			f.bad = append(f.bad, "PUT "+key+" with "+strconv.Itoa(n)+" index terms")
		}
		f.objects[key] = n
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodHead:
		f.lastHead = key
		if _, ok := f.objects[key]; !ok {
			w.WriteHeader(http.StatusNotFound)
		}
	case strings.HasPrefix(r.URL.Path, "/v1/index/"):
		q := r.URL.Query()
		if r.URL.Path != "/v1/index/"+nhsDOB || q.Get("start") == "" || q.Get("end") < q.Get("start") || q.Get("max_results") != "100" {
			f.bad = append(f.bad, "query "+r.URL.String())
		}
		_, _ = w.Write([]byte(`{"entries":[]}`))
	default:
		if f.lastHead != "" && f.lastHead != key {
			// Another client's GET may come between a HEAD and its GET:
			// only count, the run's totals are checked below.
			f.methods["get-other"]++
		}
		f.lastHead = ""
		if _, ok := f.objects[key]; !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("value"))
	}
}

// The nhs workload through the Cairn HTTP driver: the preload writes
// every object with its terms, HEAD-then-GETs send both requests, and
// the results hold every operation kind with its own series.
func TestNHSRunThroughHTTPDriver(t *testing.T) {
	f := &fakeCairn{t: t, objects: map[string]int{}, methods: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	d, err := NewDriver(DriverConfig{Target: srv.URL, Conns: 1, Route: RouteFixed})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, err := NewWorkload(Params{Workload: "nhs", Keys: 200, Mix: map[string]int{"get": 30, "head_get": 30, "update": 20, "insert": 10, "index_query": 10}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Preload(context.Background(), d, w, 4, 5*time.Second); err != nil || n != 200 || len(f.objects) != 200 {
		t.Fatalf("preload: %d, %v, %d objects", n, err, len(f.objects))
	}
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 1, Conns: 1, Total: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.bad) > 0 {
		t.Fatalf("malformed requests: %v", f.bad[:min(5, len(f.bad))])
	}
	for _, name := range []string{"get", "head_get", "update", "insert", "index_query"} {
		o := run.Operations[name]
		if o.Ops == 0 || o.Errors != 0 || o.NotFound != 0 || len(o.Series) == 0 && run.Elapsed >= 1 {
			t.Fatalf("%s: %+v", name, o)
		}
	}
	hg := run.Operations["head_get"].Ops
	if uint64(f.methods[http.MethodHead]) != hg || f.methods["get-other"] != 0 {
		t.Fatalf("%d HEADs for %d HEAD-then-GETs; %d GETs of another key after a HEAD (one client)", f.methods[http.MethodHead], hg, f.methods["get-other"])
	}
}
