package auth

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory.
type memStore struct {
	mu   sync.Mutex
	m    map[string][]byte
	gets int
	fail error
}

func (s *memStore) Get(_ context.Context, key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.fail != nil {
		return nil, false, s.fail
	}
	v, ok := s.m[string(key)]
	return v, ok, nil
}

func (s *memStore) Put(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.m[string(key)] = append([]byte(nil), value...)
	return nil
}

func (s *memStore) PutIfAbsent(_ context.Context, key, value []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	if _, ok := s.m[string(key)]; ok {
		return false, nil
	}
	s.m[string(key)] = append([]byte(nil), value...)
	return true, nil
}

func newMem() *memStore { return &memStore{m: map[string][]byte{}} }

// routes is every route of the API with the role each method needs.
// TestRouteTableCoversTheAPI checks that no route of internal/api/http
// is missing here.
var routes = []struct {
	path  string
	roles map[string]Role // by method; missing methods need admin
}{
	{"/metrics", map[string]Role{"GET": RoleNone, "HEAD": RoleNone}},
	{"/v0/status", map[string]Role{"GET": RoleNone, "HEAD": RoleNone}},
	{"/v1/status", map[string]Role{"GET": RoleNone, "HEAD": RoleNone}},
	{"/v1/cluster", map[string]Role{"GET": RoleNone, "HEAD": RoleNone}},
	{"/v0/entity", map[string]Role{"GET": RoleRead, "HEAD": RoleRead, "PUT": RoleWrite, "POST": RoleWrite, "DELETE": RoleWrite}},
	{"/v1/kv/", map[string]Role{"GET": RoleRead, "HEAD": RoleRead, "PUT": RoleWrite, "POST": RoleWrite, "DELETE": RoleWrite}},
	{"/v1/kv/some/key", map[string]Role{"GET": RoleRead, "HEAD": RoleRead, "PUT": RoleWrite, "POST": RoleWrite, "DELETE": RoleWrite}},
	{"/v1/kv", map[string]Role{"GET": RoleRead, "HEAD": RoleRead, "PUT": RoleWrite, "POST": RoleWrite, "DELETE": RoleWrite}},
	{"/v1/index/", map[string]Role{"GET": RoleRead, "HEAD": RoleRead}},
	{"/v1/index/email_bin/a@example.com", map[string]Role{"GET": RoleRead, "HEAD": RoleRead}},
	{"/v1/admin/backup/shards/", nil},
	{"/v1/admin/backup/shards/1", nil},
	{"/v1/admin/shards/", nil},
	{"/v1/admin/nodes", nil},
	{"/v1/admin/nodes/join", nil},
	{"/v1/admin/nodes/{id}/decommission", nil},
	{"/v1/admin/nodes/{id}/remove", nil},
	{"/v1/admin/nodes/{id}/role", nil},
	{"/v1/admin/settings", nil},
	{"/v1/admin/shards/3/move", nil},
	{"/v1/admin/hashes", nil},
	{"/v1/admin/fault", nil},
	{TokensPath, nil},
	{"/debug/pprof/", nil},
	{"/debug/pprof/cmdline", nil},
	{"/debug/pprof/symbol", nil},
	{"/debug/pprof/profile", nil},
	{"/debug/pprof/trace", nil},
	{"/debug/pprof/heap", nil},
	{"/", nil},
	{"/no/such/path", nil},
}

var methods = []string{"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"}

// Every route of internal/api/http is in the table above: a route added
// there must be given its role here (and in Required).
func TestRouteTableCoversTheAPI(t *testing.T) {
	files, err := filepath.Glob("../http/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no API sources: %v", err)
	}
	known := map[string]bool{}
	for _, r := range routes {
		known[r.path] = true
	}
	re := regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			n++
			p := m[1]
			if i := strings.IndexByte(p, ' '); i >= 0 { // "GET /path" patterns
				p = p[i+1:]
			}
			if !known[p] {
				t.Errorf("%s: route %q is not in the auth route table", f, m[1])
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d routes: the pattern no longer matches the API's code", n)
	}
}

// Every route, every method, every caller: 401 without a valid token,
// 403 with too low a role, through otherwise.
func TestEveryRouteEveryRole(t *testing.T) {
	a := New(newMem())
	ctx := context.Background()
	tokens := map[Role]string{}
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		tok, err := a.Create(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		tokens[r] = tok
	}
	var c Counters
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }), &c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	callers := []struct {
		name string
		auth string
		role Role
	}{
		{"no token", "", RoleNone},
		{"malformed", "Bearer nonsense", RoleNone},
		{"unknown", "Bearer cairn_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", RoleNone},
		{"basic scheme", "Basic " + tokens[RoleAdmin], RoleNone},
		{"read", "Bearer " + tokens[RoleRead], RoleRead},
		{"write", "Bearer " + tokens[RoleWrite], RoleWrite},
		{"admin", "bearer " + tokens[RoleAdmin], RoleAdmin},
	}
	var want401, want403 uint64
	for _, rt := range routes {
		for _, m := range methods {
			need, ok := rt.roles[m]
			if !ok {
				need = RoleAdmin
			}
			if got := Required(m, rt.path); got != need {
				t.Errorf("Required(%s %s) = %s, want %s", m, rt.path, got, need)
			}
			for _, cl := range callers {
				req := httptest.NewRequest(m, rt.path, nil)
				if cl.auth != "" {
					req.Header.Set("Authorization", cl.auth)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				want := 299
				switch {
				case need == RoleNone:
				case cl.role == RoleNone:
					want = 401
					want401++
				case cl.role < need:
					want = 403
					want403++
				case rt.path == TokensPath:
					want = w.Code // served by the middleware itself; checked below
				}
				if w.Code != want {
					t.Errorf("%s %s as %s: %d, want %d", m, rt.path, cl.name, w.Code, want)
				}
				if want == 401 || want == 403 {
					var body map[string]string
					if json.Unmarshal(w.Body.Bytes(), &body) != nil || body["error"] == "" || body["message"] == "" {
						t.Errorf("%s %s as %s: body %q is no JSON error", m, rt.path, cl.name, w.Body.String())
					}
				}
				if want == 401 && w.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", m, rt.path)
				}
			}
		}
	}
	if c.Unauthenticated.Load() != want401 || c.Forbidden.Load() != want403 || a.Failures() != want401+want403 {
		t.Fatalf("counted %d 401 and %d 403 (%d failures), want %d and %d", c.Unauthenticated.Load(), c.Forbidden.Load(), a.Failures(), want401, want403)
	}
}

func TestCreateTokenEndpoint(t *testing.T) {
	store := newMem()
	a := New(store)
	admin, err := a.Bootstrap(context.Background())
	if err != nil || admin == "" {
		t.Fatalf("bootstrap: %q %v", admin, err)
	}
	if again, err := a.Bootstrap(context.Background()); err != nil || again != "" {
		t.Fatalf("second bootstrap made a token: %q %v", again, err)
	}
	for k, v := range store.m {
		if strings.Contains(k, admin) || strings.Contains(string(v), admin) {
			t.Fatal("the token is stored in clear")
		}
	}
	var c Counters
	do := requester(a.Middleware(http.NotFoundHandler(), &c, slog.Default()))
	w := do("POST", TokensPath+"?role=write", admin)
	var got map[string]string
	if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &got) != nil || got["role"] != "write" || !strings.HasPrefix(got["token"], "cairn_") {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if r, err := a.Authenticate(context.Background(), got["token"]); err != nil || r != RoleWrite {
		t.Fatalf("new token: %s %v", r, err)
	}
	if w := do("POST", TokensPath+"?role=root", admin); w.Code != 400 {
		t.Fatalf("bad role: %d", w.Code)
	}
	if w := do("GET", TokensPath, admin); w.Code != 405 {
		t.Fatalf("GET: %d", w.Code)
	}
	if w := do("POST", TokensPath+"?role=admin", got["token"]); w.Code != 403 {
		t.Fatalf("a write token made a token: %d", w.Code)
	}
}

func TestCacheAndStoreErrors(t *testing.T) {
	store := newMem()
	a := New(store)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	tok, err := a.Create(context.Background(), RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := a.Authenticate(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if store.gets != 1 {
		t.Fatalf("%d reads for 3 checks within the TTL, want 1", store.gets)
	}
	now = now.Add(CacheTTL + time.Second)
	store.fail = errors.New("no quorum")
	if _, err := a.Authenticate(context.Background(), tok); err == nil || errors.Is(err, ErrBadToken) {
		t.Fatalf("store failure: %v, want an error other than ErrBadToken", err)
	}
	h := a.Middleware(http.NotFoundHandler(), &Counters{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	req := httptest.NewRequest("GET", "/v1/kv/x", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 503 {
		t.Fatalf("store down: %d, want 503", w.Code)
	}
	if _, err := ParseRole("none"); err == nil {
		t.Fatal("role none parsed")
	}
}

// The system keys are out of reach of the data routes, even for admin.
func TestReservedKeysRefused(t *testing.T) {
	a := New(newMem())
	admin, err := a.Create(context.Background(), RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }), &Counters{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, target := range []string{"/v1/kv/%00sys/auth/token/ab", "/v0/entity?id=%00sys", "/v1/kv/%00"} {
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			req := httptest.NewRequest(m, target, strings.NewReader(`{"role":"admin"}`))
			req.Header.Set("Authorization", "Bearer "+admin)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != 403 || !strings.Contains(w.Body.String(), "reserved_key") {
				t.Errorf("%s %s: %d %s", m, target, w.Code, w.Body)
			}
		}
	}
	req := httptest.NewRequest("GET", "/v1/kv/x%00", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 299 {
		t.Fatalf("a key with a later 0 byte: %d", w.Code)
	}
}

// requester returns a function that sends method target to h with the
// bearer token tok and returns the answer.
func requester(h http.Handler) func(method, target, tok string) *httptest.ResponseRecorder {
	return func(method, target, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
}
