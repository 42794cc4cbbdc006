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
	"github.com/cairn-db/cairn/internal/api/auth/authtest"
)

// `token revoke` never sends a token: one given with spaces around it
// (pasted, or read from a file) is still named by its id, and an
// argument that is neither an id nor a token is refused before anything
// is sent, and not echoed (also when it starts with '-' and is read as a
// flag).
func TestTokenRevokeNeverSendsTheToken(t *testing.T) {
	a := auth.New(authtest.NewStore())
	admin, err := a.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var paths []string
	mw := a.Middleware(http.NotFoundHandler(), &auth.Counters{}, slog.Default())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.RequestURI())
		mu.Unlock()
		mw.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tok, _, err := createToken(context.Background(), srv.Client(), srv.URL, admin, "write", 0)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimPrefix(tok, "cairn_")
	for _, tc := range []struct {
		arg    string
		revoke bool
	}{
		{" " + tok + "\n", true},
		{"Bearer " + tok, false},
		{secret, false},
		{"-" + secret, false}, // read as a flag: the parser's error must not show it
	} {
		cmd := newAdminCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&strings.Builder{})
		cmd.SetArgs([]string{"--endpoint", srv.URL, "token", "revoke", tc.arg, "--token", admin})
		err := cmd.Execute()
		if tc.revoke && (err != nil || !strings.Contains(out.String(), auth.TokenID(tok))) {
			t.Errorf("revoke %q: %q %v", tc.arg, out.String(), err)
		}
		if !tc.revoke && err == nil {
			t.Errorf("revoke %q: no error", tc.arg)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("revoke %q: the error shows the token: %v", tc.arg, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if strings.Contains(p, secret) {
			t.Errorf("the token was sent in a request's path: %s", p)
		}
	}
	if _, err := a.Authenticate(context.Background(), tok); err == nil {
		t.Error("the token still authenticates")
	}
}
