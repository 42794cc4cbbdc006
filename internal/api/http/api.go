package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Backend is what the API needs from the coordinator.
type Backend interface {
	Get(ctx context.Context, key []byte, opts kv.ReadOptions) (kv.Value, error)
	Put(ctx context.Context, key, value []byte, opts kv.WriteOptions) (version uint64, created bool, err error)
	Delete(ctx context.Context, key []byte, opts kv.WriteOptions) (version uint64, err error)
	Head(ctx context.Context, key []byte, opts kv.ReadOptions) (kv.Meta, error)
	List(ctx context.Context, opts kv.ListOptions) (kv.ListPage, error)
	IndexQuery(ctx context.Context, opts kv.IndexQueryOptions) (kv.IndexPage, error)
	Status() kv.NodeStatus
	Cluster(ctx context.Context) kv.ClusterInfo
	ReplicationFactor() int
}

// Config of the HTTP API.
type Config struct {
	// MaxKeySize in bytes; longer keys get 400. Default 4096.
	MaxKeySize int
	// MaxValueSize in bytes; larger bodies get 413. Default 8 MiB.
	MaxValueSize int
	// RequestTimeout is each request's deadline (504 after). Default 5s.
	RequestTimeout time.Duration
	// MaxInflight bounds data requests in flight (503 beyond). Default 4096.
	MaxInflight int
	Logger      *slog.Logger
	// Registerer and Gatherer serve /metrics; nil makes a private registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Faults enables POST /v1/admin/fault; nil (the default) answers 403.
	Faults FaultInjector
	// Stopping ends when the node begins to stop: long runs (profiles,
	// traces) end with it, so a shutdown never waits on them. Default:
	// never ends.
	Stopping context.Context
	// Members serves the membership admin routes (/v1/admin/nodes…,
	// /v1/admin/settings); nil answers them 503.
	Members Membership
	// MaxScans bounds the full-data scans (/v1/admin/hashes) running at
	// once; more get 503. Default 1.
	MaxScans int
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	if c.MaxKeySize == 0 {
		c.MaxKeySize = 4096
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = 8 << 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Stopping == nil {
		c.Stopping = context.Background()
	}
	if c.MaxScans == 0 {
		c.MaxScans = 1
	}
	if c.Registerer == nil || c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	return c
}

// Validate reports the first field of a filled Config out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxKeySize < 1:
		return fmt.Errorf("httpapi: MaxKeySize %d: want at least 1 byte", c.MaxKeySize)
	case c.MaxValueSize < 0:
		return fmt.Errorf("httpapi: MaxValueSize %d: want 0 bytes or more", c.MaxValueSize)
	case c.RequestTimeout < 0:
		return fmt.Errorf("httpapi: RequestTimeout %s: want a positive duration", c.RequestTimeout)
	case c.MaxInflight < 1:
		return fmt.Errorf("httpapi: MaxInflight %d: want at least 1", c.MaxInflight)
	case c.MaxScans < 1:
		return fmt.Errorf("httpapi: MaxScans %d: want at least 1", c.MaxScans)
	}
	return nil
}

type api struct {
	b   Backend
	cfg Config
	sem chan struct{}
	m   *metrics
	// scans and profiles hold a token per running full-data scan and
	// per running profile or trace.
	scans, profiles chan struct{}
}

// New returns the API handler.
func New(b Backend, cfg Config) (http.Handler, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &api{b: b, cfg: cfg, sem: make(chan struct{}, cfg.MaxInflight), m: newMetrics(cfg.Registerer),
		scans: make(chan struct{}, cfg.MaxScans), profiles: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	entity, kv := a.wrap("v0_entity", true, a.v0Entity), a.wrap("v1_kv", true, a.v1KV)
	uncleanKey := a.wrap("v1_kv", false, func(w http.ResponseWriter, r *http.Request) {
		badRequest(w, "the key path has an empty, \".\" or \"..\" segment; send such a key's bytes percent-encoded (%2F for /, %2E for .)")
	})
	index := a.wrap("v1_index", true, a.v1Index)
	uncleanTerm := a.wrap("v1_index", false, func(w http.ResponseWriter, r *http.Request) {
		badRequest(w, "the index path has an empty, \".\" or \"..\" segment; send such a term's bytes percent-encoded (%2F for /, %2E for .)")
	})
	mux.Handle("/v0/status", a.wrap("v0_status", false, a.v0Status))
	mux.Handle("/v0/entity", entity)
	mux.Handle("/v1/kv/", kv)
	mux.Handle("/v1/kv", a.wrap("v1_list", true, a.v1List))
	mux.Handle("/v1/index/", index)
	mux.Handle("/v1/status", a.wrap("v1_status", false, a.v1Status))
	mux.Handle("/v1/cluster", a.wrap("v1_cluster", false, a.v1Cluster))
	mux.Handle("/v1/admin/hashes", a.wrap("admin", false, a.adminHashes))
	mux.Handle("/v1/admin/fault", a.wrap("admin", false, a.adminFault))
	mux.Handle("/v1/admin/backup/shards/", a.wrap("admin_backup", false, a.adminBackup))
	mux.Handle("/v1/admin/shards/", a.wrap("admin", false, a.adminShards))
	mux.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	a.debugRoutes(mux)
	a.memberRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such path: "+r.URL.Path)
	})
	// The data routes skip the mux's pattern matching when the path is
	// already clean (the mux would route it there unchanged). A key path
	// the mux would clean is refused: the mux would redirect it to the
	// cleaned path, and a client that follows redirects would write, read
	// or delete another key than the one it named. So is an index path
	// the mux would clean: the redirect would answer another term's (or
	// index's) objects.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkQuery(r.URL.RawQuery); err != nil {
			badRequest(w, err.Error())
			return
		}
		if err := repeatedField(r); err != nil {
			badRequest(w, err.Error())
			return
		}
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/v1/kv/") && cleanPath(p):
			kv.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/v1/kv/") && !cleanPath(r.URL.EscapedPath()):
			uncleanKey.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/v1/index/") && cleanPath(p):
			index.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/v1/index/") && !cleanPath(r.URL.EscapedPath()):
			uncleanTerm.ServeHTTP(w, r)
		case p == "/v0/entity":
			entity.ServeHTTP(w, r)
		default:
			// What the mux would answer other than in JSON: an empty 400
			// to an asterisk target, a redirect to the path cleaned of
			// empty, "." and ".." segments, or one from a subtree's
			// path without its slash (/v1/index) to the subtree.
			switch {
			case r.RequestURI == "*" || !strings.HasPrefix(p, "/"):
				badRequest(w, "the request target must be a path beginning with /")
			case !cleanPath(r.URL.EscapedPath()):
				badRequest(w, "the path has an empty, \".\" or \"..\" segment")
			case isSubtreeRedirect(mux, r):
				writeError(w, http.StatusNotFound, "not_found", "no such path: "+p+" (the routes under it begin "+p+"/)")
			default:
				mux.ServeHTTP(w, r)
			}
		}
	}), nil
}

// checkQuery refuses a query string that does not parse: url.Values
// drops the pair that fails and every parameter still reads, so
// "prefix=a;b" would list every key and "replicas=%zz" write with the
// default replicas. Only a semicolon or a bad escape fails a parse.
func checkQuery(q string) error {
	if !strings.ContainsAny(q, "%;") {
		return nil
	}
	if _, err := url.ParseQuery(q); err != nil {
		return fmt.Errorf("malformed query: %v (escape ';' as %%3B and '%%' as %%25)", err)
	}
	return nil
}

// isSubtreeRedirect reports whether mux would redirect r's path (clean)
// to the subtree of the same name with a slash (/v1/index to /v1/index/).
func isSubtreeRedirect(mux *http.ServeMux, r *http.Request) bool {
	if strings.HasSuffix(r.URL.Path, "/") {
		return false
	}
	_, pattern := mux.Handler(r)
	return pattern == r.URL.Path+"/"
}

// cleanPath reports whether p has no empty, "." or ".." segment, so
// path.Clean (which the mux applies, redirecting when it changes the path)
// leaves it as it is, but for a trailing slash.
func cleanPath(p string) bool {
	for i := 1; i < len(p); i++ {
		if p[i-1] != '/' {
			continue
		}
		rest := p[i:]
		if rest == "" || rest[0] == '/' || rest == "." || rest == ".." ||
			strings.HasPrefix(rest, "./") || strings.HasPrefix(rest, "../") {
			return false
		}
	}
	return true
}

// statusWriter records the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// wrap adds the deadline, the in-flight bound (limited routes) and metrics.
func (a *api) wrap(route string, limited bool, h func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			a.m.observe(route, r.Method, sw.code, time.Since(start))
		}()
		if limited {
			select {
			case a.sem <- struct{}{}:
				a.m.inflight.Inc()
				defer func() { <-a.sem; a.m.inflight.Dec() }()
			default:
				sw.Header().Set("Retry-After", "1")
				writeError(sw, http.StatusServiceUnavailable, "overloaded", "too many requests in flight")
				return
			}
		}
		// A deadline the server already gave the request stands (the
		// HTTP/1.1 server hands out shared, coarse ones).
		if _, ok := r.Context().Deadline(); !ok {
			ctx, cancel := context.WithTimeout(r.Context(), a.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h(sw, r)
	})
}
