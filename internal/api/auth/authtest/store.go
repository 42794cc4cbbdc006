package authtest

import (
	"context"
	"sync"
)

// Store is an auth.Store in memory, safe for concurrent use.
type Store struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{m: map[string][]byte{}} }

// Get returns key's value; found false if it is absent.
func (s *Store) Get(_ context.Context, key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(key)]
	return v, ok, nil
}

// Put writes key=value.
func (s *Store) Put(_ context.Context, key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(key)] = append([]byte(nil), value...)
	return nil
}

// PutIfAbsent writes key=value if key is absent.
func (s *Store) PutIfAbsent(_ context.Context, key, value []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(key)]; ok {
		return false, nil
	}
	s.m[string(key)] = append([]byte(nil), value...)
	return true, nil
}
