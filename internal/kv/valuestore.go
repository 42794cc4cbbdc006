package kv

import (
	"context"
	"errors"
)

// ValueStore reads and writes plain values through a coordinator:
// linearizable reads (found false for an absent key) and ordinary
// replicated writes, without versions or options, and create-only
// writes. The token records of
// internal/api/auth are kept with it (its Store).
type ValueStore struct{ C *Coordinator }

// Get returns key's value; found is false when the key is absent.
func (s ValueStore) Get(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	v, err := s.C.Get(ctx, key, ReadOptions{})
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v.Data, true, nil
}

// Put writes key=value.
func (s ValueStore) Put(ctx context.Context, key, value []byte) error {
	_, _, err := s.C.Put(ctx, key, value, WriteOptions{})
	return err
}

// PutIfAbsent writes key=value only if key is absent when the shard
// applies the write; written is false when it was present.
func (s ValueStore) PutIfAbsent(ctx context.Context, key, value []byte) (bool, error) {
	_, _, err := s.C.Put(ctx, key, value, WriteOptions{Cond: CondIfAbsent})
	if errors.Is(err, ErrPreconditionFailed) {
		return false, nil
	}
	return err == nil, err
}
