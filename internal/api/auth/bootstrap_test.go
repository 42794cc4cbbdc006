package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// faultyStore is a memStore whose writes of one key fail as told: the
// write is refused (applied false), applied and yet answered with an
// error (a write that timed out after the log took it), or held and
// applied when the test says (a write that arrives late).
type faultyStore struct {
	*memStore
	match   func(key string) bool // the keys whose writes fail
	fails   int                   // failing writes left
	applied bool                  // a failing write is applied all the same
	hold    bool                  // a failing write is kept in held
	held    []func()              // the held writes, to apply later
	before  func(key string)      // called before each write, if set
}

func isMarker(k string) bool      { return k == BootstrapKey }
func isTokenRecord(k string) bool { return strings.HasPrefix(k, TokenPrefix) }

var errTimedOut = errors.New("deadline exceeded")

func (s *faultyStore) Put(ctx context.Context, key, value []byte) error {
	_, err := s.write(key, func() (bool, error) { return true, s.memStore.Put(ctx, key, value) })
	return err
}

func (s *faultyStore) PutIfAbsent(ctx context.Context, key, value []byte) (bool, error) {
	return s.write(key, func() (bool, error) { return s.memStore.PutIfAbsent(ctx, key, value) })
}

func (s *faultyStore) write(key []byte, apply func() (bool, error)) (bool, error) {
	if s.before != nil {
		s.before(string(key))
	}
	if s.match != nil && s.match(string(key)) && s.fails > 0 {
		s.fails--
		switch {
		case s.hold:
			s.held = append(s.held, func() { _, _ = apply() })
		case s.applied:
			_, _ = apply()
		}
		return false, errTimedOut
	}
	return apply()
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

// Two nodes that each take themselves for the one to bootstrap (each
// sure it has the lowest id) make one admin token between them: the
// second marker is refused, and its node revokes the token it drew,
// which no one would hold.
func TestBootstrapRacingNodesMakeOneToken(t *testing.T) {
	s := &faultyStore{memStore: newMem()}
	first, second := New(s), New(s)
	var secondTok string
	raced := false
	s.before = func(key string) {
		if key == BootstrapKey && !raced {
			raced = true // first has written its record: second runs whole
			var err error
			if secondTok, err = second.Bootstrap(context.Background()); err != nil {
				t.Errorf("second bootstrap: %v", err)
			}
		}
	}
	firstTok, err := first.Bootstrap(context.Background())
	if err != nil {
		t.Fatalf("first bootstrap: %v", err)
	}
	if secondTok == "" || firstTok != "" {
		t.Fatalf("tokens handed out: first %q, second %q; want the second only", firstTok, secondTok)
	}
	if r, err := second.Authenticate(context.Background(), secondTok); err != nil || r != RoleAdmin {
		t.Fatalf("the handed-out token: %s %v, want admin", r, err)
	}
	valid := 0
	s.mu.Lock()
	for k, v := range s.m {
		var rec record
		if strings.HasPrefix(k, TokenPrefix) && json.Unmarshal(v, &rec) == nil && rec.Revoked == nil {
			valid++
		}
	}
	s.mu.Unlock()
	if valid != 1 {
		t.Fatalf("%d unrevoked token records, want 1 (the handed-out token's)", valid)
	}
}

// A first attempt's record write that times out and arrives after the
// token was handed out and revoked does not bring the token back.
func TestBootstrapLateRecordWriteKeepsRevocation(t *testing.T) {
	s := &faultyStore{memStore: newMem(), match: isTokenRecord, fails: 1, hold: true}
	a := New(s)
	tok := bootstrapUntilDone(t, a)
	if tok == "" || len(s.held) != 1 {
		t.Fatalf("token %q, %d held writes; want a token and one held write", tok, len(s.held))
	}
	hash := sha256.Sum256([]byte(tok))
	if err := a.Revoke(context.Background(), hex.EncodeToString(hash[:])); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	s.held[0]() // the first attempt's record write arrives now
	if r, err := New(s).Authenticate(context.Background(), tok); err == nil {
		t.Fatalf("the revoked first admin token authenticates again as %s after a late write", r)
	}
}
