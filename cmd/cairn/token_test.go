package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/api/auth"
)

type memTokens struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memTokens) Get(_ context.Context, k []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(k)]
	return v, ok, nil
}

func (s *memTokens) Put(_ context.Context, k, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(k)] = v
	return nil
}

func TestTokenCreate(t *testing.T) {
	a := auth.New(&memTokens{m: map[string][]byte{}})
	admin, err := a.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Middleware(http.NotFoundHandler(), &auth.Counters{}, slog.Default()))
	defer srv.Close()
	cmd := newAdminCmd()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--endpoint", srv.URL, "token", "create", "--role", "write", "--token", admin})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	if r, err := a.Authenticate(context.Background(), tok); err != nil || r != auth.RoleWrite {
		t.Fatalf("printed token %q: %v %v", tok, r, err)
	}
	if _, err := createToken(context.Background(), srv.Client(), srv.URL, tok, "admin"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a write token made an admin token: %v", err)
	}
	if _, err := createToken(context.Background(), srv.Client(), srv.URL, admin, "root"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad role: %v", err)
	}
}
