package auth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A revoked token is refused: at once by the Authenticator that revoked
// it (it drops its cache entry), and by another node's once its cached
// entry is older than the cache's TTL. Revoking is idempotent, and
// leaves the other tokens alone.
func TestRevokedTokenIsRefused(t *testing.T) {
	store := newMem()
	a, other := New(store), New(store)
	now := time.Unix(1_800_000_000, 0)
	other.now = func() time.Time { return now }
	ctx := context.Background()
	keep, err := a.Create(ctx, RoleWrite)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := a.Create(ctx, RoleWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Authenticator{a, other} {
		if r, err := x.Authenticate(ctx, gone); err != nil || r != RoleWrite {
			t.Fatalf("before the revocation: %s %v", r, err)
		}
	}
	for range 2 {
		if err := a.Revoke(ctx, TokenID(gone)); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	if _, err := a.Authenticate(ctx, gone); !errors.Is(err, ErrBadToken) {
		t.Fatalf("the revoking node still takes the token: %v", err)
	}
	now = now.Add(CacheTTL + time.Second)
	if _, err := other.Authenticate(ctx, gone); !errors.Is(err, ErrBadToken) {
		t.Fatalf("another node still takes the token after the cache's TTL: %v", err)
	}
	if r, err := a.Authenticate(ctx, keep); err != nil || r != RoleWrite {
		t.Fatalf("the other token: %s %v", r, err)
	}
	if err := a.Revoke(ctx, strings.Repeat("ab", 32)); !errors.Is(err, ErrNoSuchToken) {
		t.Fatalf("revoke of an unknown id: %v, want ErrNoSuchToken", err)
	}
	for _, bad := range []string{"", "xyz", gone, strings.Repeat("a", 63)} {
		if err := a.Revoke(ctx, bad); !errors.Is(err, ErrBadTokenID) {
			t.Fatalf("revoke of id %q: %v, want ErrBadTokenID", bad, err)
		}
	}
}

// DELETE /v1/admin/tokens/ID: admin only; 400 for a malformed id or the
// caller's own token, 404 for an unknown one, 200 and the token refused
// after; creation answers the id.
func TestRevokeEndpoint(t *testing.T) {
	a := New(newMem())
	ctx := context.Background()
	admin, err := a.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	do := requester(a.Middleware(http.NotFoundHandler(), &Counters{}, slog.Default()))
	w := do("POST", TokensPath+"?role=write", admin)
	var made map[string]string
	if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &made) != nil || made["id"] != TokenID(made["token"]) {
		t.Fatalf("create: %d %s, want the token's id", w.Code, w.Body)
	}
	write, id := made["token"], made["id"]
	for _, tc := range []struct {
		name, method, path, tok string
		want                    int
		code                    string
	}{
		{"with a write token", "DELETE", TokensPath + "/" + id, write, 403, "forbidden"},
		{"by GET", "GET", TokensPath + "/" + id, admin, 405, "method_not_allowed"},
		{"a malformed id", "DELETE", TokensPath + "/nope", admin, 400, "bad_token_id"},
		{"an unknown id", "DELETE", TokensPath + "/" + strings.Repeat("0", 64), admin, 404, "not_found"},
		{"the caller's own token", "DELETE", TokensPath + "/" + TokenID(admin), admin, 400, "own_token"},
	} {
		w := do(tc.method, tc.path, tc.tok)
		var body map[string]any
		if w.Code != tc.want || json.Unmarshal(w.Body.Bytes(), &body) != nil || body["error"] != tc.code {
			t.Fatalf("revoke %s: %d %s, want %d %s", tc.name, w.Code, w.Body, tc.want, tc.code)
		}
	}
	if r, err := a.Authenticate(ctx, write); err != nil || r != RoleWrite {
		t.Fatalf("the token after refused revocations: %s %v", r, err)
	}
	if r, err := a.Authenticate(ctx, admin); err != nil || r != RoleAdmin {
		t.Fatalf("the admin token after its refused self-revocation: %s %v", r, err)
	}
	if w := do("DELETE", TokensPath+"/"+id, admin); w.Code != 200 {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	if w := do("PUT", "/v1/kv/k", write); w.Code != 401 {
		t.Fatalf("a request with the revoked token: %d %s, want 401", w.Code, w.Body)
	}
}
