package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// faultyStore is a memStore whose Puts of one key fail as told: the
// write is refused (applied false) or applied and yet answered with an
// error (a write that timed out after the log took it).
type faultyStore struct {
	*memStore
	match   func(key string) bool // the keys whose Puts fail
	fails   int                   // failing Puts left
	applied bool                  // a failing Put is applied all the same
}

func isMarker(k string) bool      { return k == BootstrapKey }
func isTokenRecord(k string) bool { return strings.HasPrefix(k, TokenPrefix) }

var errTimedOut = errors.New("deadline exceeded")

func (s *faultyStore) Put(ctx context.Context, key, value []byte) error {
	if s.match(string(key)) && s.fails > 0 {
		s.fails--
		if s.applied {
			_ = s.memStore.Put(ctx, key, value)
		}
		return errTimedOut
	}
	return s.memStore.Put(ctx, key, value)
}

// tokenRecords counts the token records in s.
func tokenRecords(s *memStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.m {
		if strings.HasPrefix(k, TokenPrefix) {
			n++
		}
	}
	return n
}

// bootstrapUntilDone calls Bootstrap until it succeeds (as the server
// does) and returns what it returned then.
func bootstrapUntilDone(t *testing.T, a *Authenticator) string {
	t.Helper()
	for i := 0; i < 10; i++ {
		tok, err := a.Bootstrap(context.Background())
		if err == nil {
			return tok
		}
		if !errors.Is(err, errTimedOut) {
			t.Fatalf("bootstrap: %v", err)
		}
	}
	t.Fatal("bootstrap still fails after 10 tries")
	return ""
}

// A first admin token whose writes fail and are retried is one token,
// the one the caller gets, and it is an admin's.
func TestBootstrapRetriedMakesOneToken(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(string) bool
	}{{"token record refused", isTokenRecord}, {"marker refused", isMarker}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &faultyStore{memStore: newMem(), match: tc.match, fails: 2}
			a := New(s)
			tok := bootstrapUntilDone(t, a)
			if tok == "" {
				t.Fatal("bootstrap made no token")
			}
			if n := tokenRecords(s.memStore); n != 1 {
				t.Fatalf("%d token records after retried bootstrap, want 1", n)
			}
			if r, err := a.Authenticate(context.Background(), tok); err != nil || r != RoleAdmin {
				t.Fatalf("the token bootstrap returned: %s %v, want admin", r, err)
			}
			if again, err := a.Bootstrap(context.Background()); err != nil || again != "" {
				t.Fatalf("bootstrap after success: %q %v, want none", again, err)
			}
		})
	}
}

// A marker write answered with an error though it was applied: the
// retry finds the marker, and returns the token it names (the caller
// would else hold no admin token at all).
func TestBootstrapMarkerAppliedDespiteErrorReturnsItsToken(t *testing.T) {
	s := &faultyStore{memStore: newMem(), match: isMarker, fails: 1, applied: true}
	a := New(s)
	if _, err := a.Bootstrap(context.Background()); !errors.Is(err, errTimedOut) {
		t.Fatalf("first bootstrap: %v, want the marker's error", err)
	}
	tok := bootstrapUntilDone(t, a)
	if tok == "" {
		t.Fatal("the retry returned no token, though the cluster's only admin token is the one the failed attempt drew")
	}
	if r, err := a.Authenticate(context.Background(), tok); err != nil || r != RoleAdmin {
		t.Fatalf("the token bootstrap returned: %s %v, want admin", r, err)
	}
	if n := tokenRecords(s.memStore); n != 1 {
		t.Fatalf("%d token records, want 1", n)
	}
	// Another Authenticator (a restart) finds the marker and makes none.
	if again, err := New(s).Bootstrap(context.Background()); err != nil || again != "" {
		t.Fatalf("bootstrap on a restarted node: %q %v, want none", again, err)
	}
}

// A marker in the older format (a bare time) still means made.
func TestBootstrapOldMarkerMakesNone(t *testing.T) {
	s := newMem()
	s.m[BootstrapKey] = []byte("2026-01-02T03:04:05Z")
	if tok, err := New(s).Bootstrap(context.Background()); err != nil || tok != "" {
		t.Fatalf("bootstrap over an old marker: %q %v, want none", tok, err)
	}
	if n := tokenRecords(s); n != 0 {
		t.Fatalf("%d token records, want 0", n)
	}
}
