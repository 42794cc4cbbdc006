package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/api/auth/authtest"
	"github.com/cairn-db/cairn/internal/security"
	"github.com/prometheus/client_golang/prometheus"
)

// --auth guards the client port; the peer port takes forwarded requests
// (writes of any key, the token records included) from whoever reaches
// it unless peer TLS is on. A node with --auth and a plain peer port
// says so at start; one with peer TLS does not.
func TestAuthWarnsOfPlainPeerPort(t *testing.T) {
	for _, peerTLS := range []bool{false, true} {
		var logs bytes.Buffer
		cfg := Config{NodeID: 2, Auth: true}
		if peerTLS {
			cfg.PeerTLS = security.Files{Cert: "n.crt", Key: "n.key", CA: "ca.crt"}
		}
		s := &Server{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
		s.startAuth(map[uint64]string{1: "127.0.0.1:9080", 2: "127.0.0.1:9081"})
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "peer port")
		if warned == peerTLS {
			t.Errorf("peer TLS %v: warned %v about the peer port; logs:\n%s", peerTLS, warned, logs.String())
		}
	}
}

// The node of lowest id makes the first admin token and writes it to
// DATA-DIR/admin-token (mode 0600). Logs are shipped to log systems: the
// token is never in them; the log names the file that holds it.
func TestFirstAdminTokenIsInItsFileNotTheLog(t *testing.T) {
	dir := t.TempDir()
	store := authtest.NewStore()
	start := func() string {
		var logs bytes.Buffer
		s := &Server{cfg: Config{NodeID: 1, Auth: true, DataDir: dir}, log: slog.New(slog.NewTextHandler(&logs, nil)),
			stopping: context.Background(), authn: auth.New(store)}
		s.startAuth(map[uint64]string{1: "127.0.0.1:9080", 2: "127.0.0.1:9081"})
		if s.authDone == nil {
			t.Fatal("the node of lowest id does not make the first admin token")
		}
		<-s.authDone
		return logs.String()
	}
	logs := start()
	file := filepath.Join(dir, AdminTokenFile)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if !strings.HasPrefix(tok, "cairn_") {
		t.Fatalf("admin token file holds %q", tok)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, %v", fi.Mode(), err)
	}
	if strings.Contains(logs, tok) {
		t.Errorf("the admin token is in the log:\n%s", logs)
	}
	if !strings.Contains(logs, file) {
		t.Errorf("the log does not name the token's file %s:\n%s", file, logs)
	}
	// A restart finds the token made: its file stays as it is.
	start()
	if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != tok {
		t.Errorf("after a restart the admin token file holds %q (%v), want the first token", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
		t.Errorf("files in the data dir: %v, want the admin token file only", left)
	}
}

// With --auth, the token checks read Authorization and the token
// routes' role and ttl before the API sees the request: a repeated one
// is refused there too (400 naming it), before any token is looked at,
// rather than the first being taken.
func TestAuthRefusesRepeatedFields(t *testing.T) {
	s := &Server{cfg: Config{NodeID: 1, Auth: true}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	served := false
	h := s.withAuth(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }), prometheus.NewRegistry())
	for _, c := range []struct {
		target string
		auth   []string
		name   string
	}{
		{"/v1/admin/tokens?role=read&role=admin", nil, "role"},
		{"/v1/admin/tokens?role=read&ttl=1h&ttl=87600h", nil, "ttl"},
		{"/v1/kv/k", []string{"Bearer cairn_a", "Bearer cairn_b"}, "Authorization"},
		{"/v0/entity?id=k&id=%00x", nil, "id"},
	} {
		req := httptest.NewRequest("POST", c.target, nil)
		if c.auth != nil {
			req.Header["Authorization"] = c.auth
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if served || w.Code != 400 || !strings.Contains(w.Body.String(), c.name) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("POST %s, Authorization %q: served %v, %d %s, want 400 JSON naming %s", c.target, c.auth, served, w.Code, w.Body, c.name)
		}
	}
}

// A node that stops after the cluster took its first admin token and
// before the token reached its file gets it back at its next start: the
// candidate was kept beside the file before the cluster heard of it.
// (Before, the next start found the token made and wrote no file: the
// cluster's only admin token was held by no one.) A node whose candidate
// lost to another node's token drops it.
func TestFirstAdminTokenSurvivesAStopAfterTheMarker(t *testing.T) {
	dir := t.TempDir()
	store := authtest.NewStore()
	candidate, err := pendingAdminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := pendingAdminToken(dir); err != nil || again != candidate {
		t.Fatalf("the kept candidate read again: %v, want the same", err)
	}
	// The first life: the cluster takes the candidate, then the node stops.
	if tok, err := auth.New(store).BootstrapWith(context.Background(), candidate); err != nil || tok != candidate {
		t.Fatalf("bootstrap: %v", err)
	}
	// The next life.
	s := &Server{cfg: Config{NodeID: 1, Auth: true, DataDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		stopping: context.Background(), authn: auth.New(store)}
	var warned bool
	if err := s.bootstrapToken(&warned); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	if err != nil || strings.TrimSpace(string(b)) != candidate {
		t.Fatalf("admin token file after the restart: %q %v, want the token the cluster made", b, err)
	}
	if r, err := s.authn.Authenticate(context.Background(), candidate); err != nil || r != auth.RoleAdmin {
		t.Fatalf("the kept token: %s %v, want admin", r, err)
	}
	// Another node's data dir: its candidate loses, and goes.
	other := t.TempDir()
	lost, err := pendingAdminToken(other)
	if err != nil {
		t.Fatal(err)
	}
	s2 := &Server{cfg: Config{NodeID: 1, Auth: true, DataDir: other}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		stopping: context.Background(), authn: auth.New(store)}
	if err := s2.bootstrapToken(&warned); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(other, "*")); len(left) != 0 {
		t.Fatalf("files left by a candidate that lost: %v", left)
	}
	if _, err := s2.authn.Authenticate(context.Background(), lost); err == nil {
		t.Fatal("the losing candidate authenticates")
	}
}
