package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
)

// kvServer is a pipelining HTTP/1.1 key-value server for the loop's
// tests: PUT /v1/kv/K stores the body, GET answers it or 404.
type kvServer struct {
	mu     sync.Mutex
	data   map[string]string
	log    []string                  // method, escaped path and query of each request
	answer func(r *http.Request) int // 0: the store's answer
}

func (s *kvServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.log = append(s.log, r.Method+" "+r.URL.RequestURI())
	answer := s.answer
	s.mu.Unlock()
	if answer != nil {
		if code := answer(r); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	key := strings.TrimPrefix(r.URL.Path, "/v1/kv/")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		s.data[key] = string(body)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		v, ok := s.data[key]
		if !ok {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		fmt.Fprint(w, v)
	}
}

func serveKV(t *testing.T, s *kvServer) string {
	t.Helper()
	return serveHTTP1(t, s)
}

// serveHTTP1 serves h with internal/http1 on a free local port and
// returns its URL.
func serveHTTP1(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http1.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + l.Addr().String()
}

func loopDriver(t *testing.T, target string, conns, pipeline int, serializable bool) *httpDriver {
	t.Helper()
	d, err := NewDriver(DriverConfig{Target: target, Conns: conns, Pipeline: pipeline, Route: RouteFixed, Serializable: serializable})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(*httpDriver)
}

func TestLoopRunsEveryOperationOnce(t *testing.T) {
	s := &kvServer{data: map[string]string{}}
	d := loopDriver(t, serveKV(t, s), 3, 8, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 50, ValSize: 32})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 20, Conns: 3, Total: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops != 2000 || run.All.Errors != 0 {
		t.Fatalf("%d ops, %d errors; want 2000, 0", run.All.Ops, run.All.Errors)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) != 2000 {
		t.Fatalf("server saw %d requests, want 2000", len(s.log))
	}
	for k, v := range s.data {
		if len(v) != 32 || len(k) != 8 {
			t.Fatalf("stored %q=%q", k, v)
		}
	}
}

func TestLoopStepsAndQueries(t *testing.T) {
	s := &kvServer{data: map[string]string{}}
	d := loopDriver(t, serveKV(t, s), 2, 4, true)
	// Read-modify-writes: a GET (404 the first time) then a PUT of the key.
	w, _ := NewWorkload(Params{Workload: "ycsb-f", Records: 20})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 5, Conns: 2, Total: 300})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Errors != 0 || run.All.Ops != 300 {
		t.Fatalf("%d ops, %d errors", run.All.Ops, run.All.Errors)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gets, puts int
	for _, l := range s.log {
		switch {
		case strings.HasPrefix(l, "GET ") && strings.HasSuffix(l, "?consistency=serializable"):
			gets++
		case strings.HasPrefix(l, "PUT ") && !strings.Contains(l, "?"):
			puts++
		default:
			t.Fatalf("unexpected request %q", l)
		}
	}
	if rmw := run.Operations["rmw"].Ops; rmw == 0 || puts < int(rmw) || gets < int(rmw) {
		t.Fatalf("%d read-modify-writes, server saw %d gets and %d puts", rmw, gets, puts)
	}
}

// A YCSB E scan is one ordered read: GET /v1/kv?start=K&limit=L with a
// record's key and 1 <= L <= 100.
func TestLoopScansAreOneListing(t *testing.T) {
	s := &kvServer{data: map[string]string{}, answer: func(r *http.Request) int {
		if r.URL.Path == "/v1/kv" {
			return http.StatusOK
		}
		return 0
	}}
	d := loopDriver(t, serveKV(t, s), 2, 4, false)
	w, _ := NewWorkload(Params{Workload: "ycsb-e", Records: 50})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 4, Conns: 2, Total: 200})
	if err != nil {
		t.Fatal(err)
	}
	scans, inserts := run.Operations["scan"].Ops, run.Operations["insert"].Ops
	s.mu.Lock()
	defer s.mu.Unlock()
	var gets, puts uint64
	for _, l := range s.log {
		if !strings.HasPrefix(l, "GET ") {
			puts++
			continue
		}
		gets++
		u, err := url.Parse(strings.TrimPrefix(l, "GET "))
		if err != nil || u.Path != "/v1/kv" || !strings.HasPrefix(u.Query().Get("start"), "user") {
			t.Fatalf("scan request %q", l)
		}
		if n, err := strconv.Atoi(u.Query().Get("limit")); err != nil || n < 1 || n > 100 {
			t.Fatalf("scan limit in %q", l)
		}
	}
	if run.All.Errors != 0 || scans == 0 || puts != inserts || gets != scans {
		t.Fatalf("%d scans and %d inserts (%d errors); server saw %d gets and %d puts", scans, inserts, run.All.Errors, gets, puts)
	}
}

func TestLoopPathEscape(t *testing.T) {
	for _, k := range []string{"plain-Key_1.~", "a b/c?d%e#f", "\x00\xff"} {
		got := string(appendPathEscape(nil, []byte(k)))
		back, err := url.PathUnescape(got)
		if err != nil || back != k || strings.ContainsAny(got, " /?#") {
			t.Fatalf("%q escaped to %q, back %q %v", k, got, back, err)
		}
	}
}

func TestLoopCountsErrorAnswers(t *testing.T) {
	// A 500 is an error (a 503 is waited out: retry_test.go).
	var n atomic.Int64
	s := &kvServer{data: map[string]string{}, answer: func(*http.Request) int {
		if n.Add(1)%10 == 0 {
			return http.StatusInternalServerError
		}
		return 0
	}}
	d := loopDriver(t, serveKV(t, s), 1, 16, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 8, Conns: 1, Total: 500})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops+run.All.Errors < 500 || run.All.Errors < 40 || run.All.ErrorKinds["http_500"] != run.All.Errors {
		t.Fatalf("%d ops, %d errors %v", run.All.Ops, run.All.Errors, run.All.ErrorKinds)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return "http://" + l.Addr().String()
}

// readRequests reads n pipelined requests (no bodies or small ones).
func readRequests(br *bufio.Reader, n int) error {
	for i := 0; i < n; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, req.Body)
	}
	return nil
}

func TestLoopKeepsPipelineDepth(t *testing.T) {
	// The server reads as many requests as arrive within 200 ms before it
	// answers any: with depth 3, ten clients on one connection send 3.
	var first atomic.Int64
	target := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if err := readRequests(br, 1); err != nil {
			return
		}
		n := 1
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for readRequests(br, 1) == nil {
			n++
		}
		first.Store(int64(n))
		c.SetReadDeadline(time.Time{})
		for {
			for i := 0; i < n; i++ {
				fmt.Fprint(c, "HTTP/1.1 204 No Content\r\n\r\n")
			}
			n = 1
			if readRequests(br, 1) != nil {
				return
			}
		}
	})
	d := loopDriver(t, target, 1, 3, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 10, Conns: 1, Total: 100})
	if err != nil {
		t.Fatal(err)
	}
	if first.Load() != 3 || run.All.Ops != 100 {
		t.Fatalf("first burst %d requests (want 3), %d ops", first.Load(), run.All.Ops)
	}
}

func TestLoopSurvivesBrokenConnections(t *testing.T) {
	// Every connection answers five requests, then breaks: the clients'
	// operations on it fail as network errors and the loop dials again.
	var conns atomic.Int64
	target := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for i := 0; i < 5; i++ {
			if readRequests(br, 1) != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	d := loopDriver(t, target, 2, 4, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 4, Conns: 2, Total: 200})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops+run.All.Errors < 200 || run.All.Ops < 100 || conns.Load() < 20 {
		t.Fatalf("%d ops, %d errors %v over %d connections", run.All.Ops, run.All.Errors, run.All.ErrorKinds, conns.Load())
	}
}

func TestLoopTimesOutHungConnection(t *testing.T) {
	// The server reads but never answers: each client's operation ends as
	// a timeout after OpTimeout, and the run ends with the duration.
	target := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	d := loopDriver(t, target, 1, 4, false)
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	start := time.Now()
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 3, Conns: 1, Duration: 300 * time.Millisecond, OpTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops != 0 || run.All.Errors != 3 || run.All.ErrorKinds["timeout"] != 3 {
		t.Fatalf("%d ops, %d errors %v", run.All.Ops, run.All.Errors, run.All.ErrorKinds)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("run took %v", el)
	}
}
