package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/api/auth/authtest"
)

func TestTokenCreate(t *testing.T) {
	a := auth.New(authtest.NewStore())
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
	if _, _, err := createToken(context.Background(), srv.Client(), srv.URL, tok, "admin", 0); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a write token made an admin token: %v", err)
	}
	if _, _, err := createToken(context.Background(), srv.Client(), srv.URL, admin, "root", 0); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad role: %v", err)
	}
}

// `cairn admin token revoke` takes an id or the token itself (whose id
// it computes), and the token is refused after; the admin subcommands
// send --token (or $CAIRN_TOKEN) on every call.
func TestTokenRevokeAndAdminToken(t *testing.T) {
	a := auth.New(authtest.NewStore())
	admin, err := a.Bootstrap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// /v1/admin/nodes answers 200 only with an admin token (the handler
	// behind the middleware stands for the node's API).
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"members":[{"id":1,"state":"active"}]}`))
	})
	srv := httptest.NewServer(a.Middleware(api, &auth.Counters{}, slog.Default()))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		cmd := newAdminCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&strings.Builder{})
		cmd.SetArgs(append([]string{"--endpoint", srv.URL}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	for i, name := range []string{"by id", "by token"} {
		tok, _, err := createToken(context.Background(), srv.Client(), srv.URL, admin, "write", 0)
		if err != nil {
			t.Fatal(err)
		}
		arg := auth.TokenID(tok)
		if i == 1 {
			arg = tok
		}
		if out, err := run("token", "revoke", arg, "--token", admin); err != nil || !strings.Contains(out, auth.TokenID(tok)) {
			t.Fatalf("revoke %s: %q %v", name, out, err)
		}
		if _, err := a.Authenticate(context.Background(), tok); err == nil {
			t.Fatalf("a token revoked %s still authenticates", name)
		}
	}
	if _, err := run("node", "list", "--json"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("node list without a token: %v, want 401", err)
	}
	if out, err := run("node", "list", "--json", "--token", admin); err != nil || !strings.Contains(out, `"active"`) {
		t.Fatalf("node list with the admin token: %q %v", out, err)
	}
	t.Setenv("CAIRN_TOKEN", admin)
	if out, err := run("node", "list", "--json"); err != nil || !strings.Contains(out, `"active"`) {
		t.Fatalf("node list with $CAIRN_TOKEN: %q %v", out, err)
	}
}
