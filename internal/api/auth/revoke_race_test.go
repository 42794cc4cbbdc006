package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
)

// blockingStore holds the first Get of one key until released, after
// reading its value: a token check whose store read was served before a
// revocation and returns after it.
type blockingStore struct {
	*memStore
	key     string
	read    chan struct{} // closed once the held Get has read
	release chan struct{}
	held    bool
}

func (s *blockingStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, found, err := s.memStore.Get(ctx, key)
	s.memStore.mu.Lock()
	hold := string(key) == s.key && !s.held
	if hold {
		s.held = true
	}
	s.memStore.mu.Unlock()
	if hold {
		close(s.read)
		<-s.release
	}
	return v, found, err
}

// A token check in flight while the node revokes the token must not put
// the token back in the cache: the node that revoked it refuses it at
// once.
func TestRevokeRacingCheckDoesNotRecacheTheToken(t *testing.T) {
	mem := newMem()
	ctx := context.Background()
	a := New(mem)
	tok, err := a.Create(ctx, RoleWrite)
	if err != nil {
		t.Fatal(err)
	}
	s := &blockingStore{memStore: mem, key: string(tokenKey(hashOf(tok))), read: make(chan struct{}), release: make(chan struct{})}
	a.store = s
	done := make(chan error)
	go func() {
		_, err := a.Authenticate(ctx, tok)
		done <- err
	}()
	<-s.read
	if err := a.Revoke(ctx, TokenID(tok)); err != nil {
		t.Fatal(err)
	}
	close(s.release)
	<-done // it read the record before the revocation: it may pass
	if _, err := a.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("the node that revoked the token takes it after a racing check: %v, want ErrBadToken", err)
	}
}

func hashOf(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }
