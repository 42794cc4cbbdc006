package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// slowStore is a Store whose reads wait until release is closed (a
// shard without a leader, say), counting the reads waiting.
type slowStore struct {
	memStore
	release chan struct{}
	mu      sync.Mutex
	waiting int
}

func (s *slowStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return s.memStore.Get(ctx, key)
}

func (s *slowStore) waits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Token checks that must read the store are bounded per node: while
// MaxLookups of them wait on a slow store, one more request with a token
// not in the cache is answered 503 with Retry-After at once, instead of
// holding one more goroutine and request (requests with made-up tokens
// cost nothing to send and skip the API's in-flight bound). A token in
// the cache is still served.
func TestTokenLookupsBounded(t *testing.T) {
	store := &slowStore{memStore: memStore{m: map[string][]byte{}}, release: make(chan struct{})}
	a := New(store)
	close(store.release)
	known, err := a.Create(context.Background(), RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), known); err != nil { // now cached
		t.Fatal(err)
	}
	store.release = make(chan struct{})
	defer close(store.release)
	h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }),
		&Counters{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	get := func(tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/kv/k", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		return w
	}
	for i := 0; i < MaxLookups; i++ {
		go get(fmt.Sprintf("cairn_made-up-%d", i))
	}
	for end := time.Now().Add(10 * time.Second); store.waits() < MaxLookups; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d lookups waiting, want %d", store.waits(), MaxLookups)
		}
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- get("cairn_one-too-many") }()
	select {
	case w := <-done:
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("a token check past the bound: %d %v %s", w.Code, w.Header(), w.Body)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("a token check past the bound waits on the store (%d lookups waiting)", store.waits())
	}
	if w := get(known); w.Code != 299 {
		t.Fatalf("a cached token while the lookups are full: %d", w.Code)
	}
}
