package httpapi

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairn-db/cairn/internal/kv"
)

// fakeBackend is an in-memory Backend recording every call.
type fakeBackend struct {
	mu     sync.Mutex
	data   map[string]kv.Value
	next   uint64
	writes int
	lastR  kv.ReadOptions
	lastW  kv.WriteOptions
	// lastList and lastIndex: the options of the last List and IndexQuery.
	lastList kv.ListOptions
	// gets and heads count the value reads and the metadata reads.
	gets, heads int
	lastIndex   kv.IndexQueryOptions
	ids         map[string]string // request id -> the write it named
	err         error             // returned by every data call when set
	block       chan struct{}     // data calls wait on it when set
	entered     chan struct{}
}

func newFake() *fakeBackend { return &fakeBackend{data: map[string]kv.Value{}, next: 1} }

func (f *fakeBackend) wait(ctx context.Context) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.err
}

func (f *fakeBackend) Get(ctx context.Context, key []byte, o kv.ReadOptions) (kv.Value, error) {
	if err := f.wait(ctx); err != nil {
		return kv.Value{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastR = o
	f.gets++
	v, ok := f.data[string(key)]
	if !ok {
		return kv.Value{}, kv.ErrNotFound
	}
	return v, nil
}

func (f *fakeBackend) Put(ctx context.Context, key, value []byte, o kv.WriteOptions) (uint64, bool, error) {
	if err := f.wait(ctx); err != nil {
		return 0, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastW = o
	if f.reused(o, "put", key, value) {
		return 0, false, kv.ErrRequestIDReused
	}
	cur, exists := f.data[string(key)]
	if (o.Cond == kv.CondIfMatch && (!exists || cur.Version != o.Version)) || (o.Cond == kv.CondIfAbsent && exists) {
		return 0, false, kv.ErrPreconditionFailed
	}
	f.writes++
	f.next++
	f.data[string(key)] = kv.Value{Data: append([]byte(nil), value...), Version: f.next, Index: o.Index}
	return f.next, !exists, nil
}

func (f *fakeBackend) Delete(ctx context.Context, key []byte, o kv.WriteOptions) (uint64, error) {
	if err := f.wait(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastW = o
	cur, exists := f.data[string(key)]
	if !exists {
		return 0, kv.ErrNotFound
	}
	if o.Cond == kv.CondIfMatch && cur.Version != o.Version {
		return 0, kv.ErrPreconditionFailed
	}
	f.writes++
	delete(f.data, string(key))
	return cur.Version, nil
}

func (f *fakeBackend) Status() kv.NodeStatus                  { return kv.NodeStatus{NodeID: 7} }
func (f *fakeBackend) Cluster(context.Context) kv.ClusterInfo { return kv.ClusterInfo{NodeID: 7} }
func (f *fakeBackend) ReplicationFactor() int                 { return 3 }

// reused reports whether o's request id named another write (as the
// shard's dedup table does), recording it otherwise.
func (f *fakeBackend) reused(o kv.WriteOptions, op string, key, value []byte) bool {
	if len(o.RequestID) == 0 {
		return false
	}
	w := fmt.Sprintf("%s %q %q %d %d", op, key, value, o.Cond, o.Version)
	if f.ids == nil {
		f.ids = map[string]string{}
	}
	if prev, ok := f.ids[string(o.RequestID)]; ok {
		return prev != w
	}
	f.ids[string(o.RequestID)] = w
	return false
}

func (f *fakeBackend) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}
