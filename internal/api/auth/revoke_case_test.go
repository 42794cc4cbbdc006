package auth

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// The own-token guard holds for any spelling of the caller's id: hex is
// case-insensitive, so an id in upper case names the same token and must
// be refused as the caller's own, not revoke it.
func TestRevokeOwnTokenInUpperCaseIsRefused(t *testing.T) {
	a := New(newMem())
	ctx := context.Background()
	admin, err := a.Bootstrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	do := requester(a.Middleware(http.NotFoundHandler(), &Counters{}, slog.Default()))
	w := do("DELETE", TokensPath+"/"+strings.ToUpper(TokenID(admin)), admin)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "own_token") {
		t.Fatalf("revoke of the caller's own id in upper case: %d %s, want 400 own_token", w.Code, w.Body)
	}
	if r, err := a.Authenticate(ctx, admin); err != nil || r != RoleAdmin {
		t.Fatalf("the admin token after its refused self-revocation: %s %v", r, err)
	}
}
