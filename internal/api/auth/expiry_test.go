package auth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// A token made with a time to live works until then, on the clock of
// the node checking it, and not a moment longer: the cache of checked
// tokens does not outlive it.
func TestExpiringToken(t *testing.T) {
	a := New(newMem())
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	tok, expires, err := a.CreateExpiring(ctx, RoleWrite, 10*time.Second)
	if err != nil || !expires.Equal(now.Add(10*time.Second)) {
		t.Fatalf("create: expires %v %v, want %v", expires, err, now.Add(10*time.Second))
	}
	for _, at := range []time.Duration{0, 9 * time.Second} { // the second check reads again
		now = time.Unix(1000, 0).Add(at)
		if r, err := a.Authenticate(ctx, tok); err != nil || r != RoleWrite {
			t.Fatalf("at +%v: %s %v, want write", at, r, err)
		}
	}
	now = time.Unix(1010, 0)
	if _, err := a.Authenticate(ctx, tok); !errors.Is(err, ErrTokenExpired) || !errors.Is(err, ErrBadToken) {
		t.Fatalf("at its expiry: %v, want ErrTokenExpired (an ErrBadToken)", err)
	}
	if _, _, err := a.CreateExpiring(ctx, RoleRead, -time.Second); err == nil {
		t.Fatal("a negative time to live was taken")
	}
	// Without a time to live a token does not expire.
	forever, never, err := a.CreateExpiring(ctx, RoleRead, 0)
	if err != nil || !never.IsZero() {
		t.Fatalf("create without ttl: %v %v", never, err)
	}
	now = now.Add(100 * 365 * 24 * time.Hour)
	if _, err := a.Authenticate(ctx, forever); err != nil {
		t.Fatalf("a token without ttl, a century on: %v", err)
	}
}

// POST TokensPath?role=R&ttl=D makes an expiring token and says when it
// expires; a bad ttl is a 400 naming it; an expired token gets 401 saying
// so.
func TestCreateEndpointTTL(t *testing.T) {
	a := New(newMem())
	now := time.Unix(5000, 0).UTC()
	a.now = func() time.Time { return now }
	admin, err := a.Create(context.Background(), RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	do := requester(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }), &Counters{}, slog.Default()))
	for _, bad := range []string{"soon", "0s", "-1h", "500ms", "87601h"} {
		w := do("POST", TokensPath+"?role=read&ttl="+bad, admin)
		var body map[string]string
		if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body["error"] != "bad_ttl" {
			t.Fatalf("ttl=%s: %d %s, want 400 bad_ttl", bad, w.Code, w.Body)
		}
	}
	w := do("POST", TokensPath+"?role=read&ttl=90m", admin)
	var made map[string]string
	if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &made) != nil || made["expires"] != now.Add(90*time.Minute).Format(time.RFC3339) {
		t.Fatalf("ttl=90m: %d %s, want 201 with expires %s", w.Code, w.Body, now.Add(90*time.Minute).Format(time.RFC3339))
	}
	if w := do("GET", "/v1/kv/x", made["token"]); w.Code != 299 {
		t.Fatalf("the new token: %d, want through", w.Code)
	}
	now = now.Add(90 * time.Minute)
	w = do("GET", "/v1/kv/x", made["token"])
	var body map[string]string
	if w.Code != 401 || json.Unmarshal(w.Body.Bytes(), &body) != nil || body["message"] != "the token expired" {
		t.Fatalf("the expired token: %d %s, want 401 saying it expired", w.Code, w.Body)
	}
	var plain map[string]string
	if w := do("POST", TokensPath+"?role=read", admin); w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &plain) != nil || plain["expires"] != "" {
		t.Fatalf("no ttl: %d %s, want 201 without expires", w.Code, w.Body)
	}
}
