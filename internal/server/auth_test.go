package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/security"
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

// memAuthStore is auth.Store in memory.
type memAuthStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memAuthStore) Get(_ context.Context, key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(key)]
	return v, ok, nil
}

func (s *memAuthStore) Put(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(key)] = append([]byte(nil), value...)
	return nil
}

// The node of lowest id makes the first admin token and writes it to
// DATA-DIR/admin-token (mode 0600). Logs are shipped to log systems: the
// token is never in them; the log names the file that holds it.
func TestFirstAdminTokenIsInItsFileNotTheLog(t *testing.T) {
	dir := t.TempDir()
	store := &memAuthStore{m: map[string][]byte{}}
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
