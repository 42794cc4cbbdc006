package etcdapi

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// fakeBackend is an in-memory coordinator: versions are a global counter
// (as a log index would be), conditions are checked as the state machine
// checks them. beforeWrite, when set, runs before each write (a test uses
// it to slip another client's write in between a read and a write).
type fakeBackend struct {
	mu           sync.Mutex
	data         map[string]kv.Value
	index        uint64
	writes       int
	lists        int
	valuesListed int // entries List answered with their values
	beforeWrite  func(f *fakeBackend)
	// history: every change, in order; evShard: the shard each was
	// recorded in; floor: the index at and below which shard 1's history
	// is gone (floors: the other shards'); changed: closed at a write.
	history []kv.Event
	evShard []uint64
	floor   uint64
	floors  map[uint64]uint64
	changed chan struct{}
	// shardOf places a key (nil: every key in shard 1) and shards lists
	// every shard (nil: shard 1 alone): a test changes both to split a
	// shard. noReplica: the shards this node holds no replica of; reads
	// counts ShardEvents calls, lookups WatchShards calls; afterRead,
	// when set, runs (f.mu held) after each ShardEvents has read.
	shardOf   func(key []byte) uint64
	shards    []uint64
	noReplica map[uint64]bool
	reads     int
	lookups   int
	afterRead func(id uint64)
	// clock is the shard clock (one shard, led here); stamps counts
	// StampClock calls.
	clock  time.Duration
	stamps int
}

func newFake() *fakeBackend {
	return &fakeBackend{data: map[string]kv.Value{}, changed: make(chan struct{})}
}

// record adds the change at f.index of key to the history (f.mu held).
func (f *fakeBackend) record(key, value []byte, del bool, terms ...wire.IndexTerm) {
	prev, had := f.data[string(key)]
	e := kv.Event{Index: f.index, Delete: del, Key: append([]byte(nil), key...)}
	if !del {
		e.Value, e.Terms = append([]byte(nil), value...), terms
	}
	if had {
		e.PrevVersion, e.PrevValue, e.PrevTerms = prev.Version, prev.Data, prev.Index
	}
	f.recordIn(f.shardOfLocked(key), e)
}

// recordIn adds e to shard id's history (f.mu held).
func (f *fakeBackend) recordIn(id uint64, e kv.Event) {
	f.history = append(f.history, e)
	f.evShard = append(f.evShard, id)
	close(f.changed)
	f.changed = make(chan struct{})
}

// shardOfLocked is the shard holding key (f.mu held).
func (f *fakeBackend) shardOfLocked(key []byte) uint64 {
	if f.shardOf == nil {
		return 1
	}
	return f.shardOf(key)
}

// floorOf is shard id's history floor (f.mu held).
func (f *fakeBackend) floorOf(id uint64) uint64 {
	if id == 1 {
		return f.floor
	}
	return f.floors[id]
}

func (f *fakeBackend) WatchShards(key, end []byte) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	switch {
	case end == nil:
		return []uint64{f.shardOfLocked(key)}
	case f.shards != nil:
		return append([]uint64(nil), f.shards...)
	}
	return []uint64{1}
}

func (f *fakeBackend) ShardEvents(id, from uint64, maxBytes int) (kv.HistoryPage, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.noReplica[id] {
		return kv.HistoryPage{}, nil, fmt.Errorf("%w: shard %d", kv.ErrNoReplica, id)
	}
	floor := f.floorOf(id)
	if from <= floor {
		return kv.HistoryPage{}, nil, &kv.CompactedError{Floor: floor}
	}
	p := kv.HistoryPage{Next: max(from, f.index+1), Floor: floor}
	for i, e := range f.history {
		if e.Index >= from && f.evShard[i] == id {
			p.Events = append(p.Events, e)
		}
	}
	changed := f.changed
	if f.afterRead != nil {
		f.afterRead(id)
	}
	return p, changed, nil
}

func (f *fakeBackend) ShardClock(uint64) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock, true
}

func (f *fakeBackend) LeaderClock(id uint64) (time.Duration, bool) { return f.ShardClock(id) }

func (f *fakeBackend) StampClock(uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stamps++
}

func (f *fakeBackend) ShardRevision(_ context.Context, id uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noReplica[id] {
		return 0, fmt.Errorf("%w: shard %d", kv.ErrNoReplica, id)
	}
	return f.index, nil
}

func (f *fakeBackend) Get(_ context.Context, key []byte, _ kv.ReadOptions) (kv.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.data[string(key)]
	if !ok {
		return kv.Value{Revision: f.index}, kv.ErrNotFound
	}
	v.Revision = f.index
	return v, nil
}

func (f *fakeBackend) hook() {
	if h := f.beforeWrite; h != nil {
		f.beforeWrite = nil
		h(f)
	}
}

// set writes directly, as another client would.
func (f *fakeBackend) set(key, value string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	f.record([]byte(key), []byte(value), false)
	f.data[key] = kv.Value{Data: []byte(value), Version: f.index}
	return f.index
}

func (f *fakeBackend) check(key []byte, opts kv.WriteOptions) error {
	v, ok := f.data[string(key)]
	switch opts.Cond {
	case kv.CondIfMatch:
		if !ok || v.Version != opts.Version {
			return kv.ErrPreconditionFailed
		}
	case kv.CondIfAbsent:
		if ok {
			return kv.ErrPreconditionFailed
		}
	}
	return nil
}

func (f *fakeBackend) Put(_ context.Context, key, value []byte, opts kv.WriteOptions) (uint64, bool, error) {
	f.hook()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(key, opts); err != nil {
		return 0, false, err
	}
	_, existed := f.data[string(key)]
	f.index++
	f.writes++
	f.record(key, value, false, opts.Index...)
	f.data[string(key)] = kv.Value{Data: append([]byte(nil), value...), Version: f.index, Index: opts.Index}
	return f.index, !existed, nil
}

func (f *fakeBackend) Delete(_ context.Context, key []byte, opts kv.WriteOptions) (uint64, error) {
	f.hook()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(key, opts); err != nil {
		return 0, err
	}
	f.index++
	if _, ok := f.data[string(key)]; !ok {
		// The delete took its log entry, which it answers, as
		// kv.Coordinator.Delete does.
		return f.index, kv.ErrNotFound
	}
	f.writes++
	f.record(key, nil, true)
	delete(f.data, string(key))
	return f.index, nil
}

// List pages through the sorted keys as the coordinator does: [Start,
// End) (End nil: no end), after After, at most Limit.
func (f *fakeBackend) List(_ context.Context, o kv.ListOptions) (kv.ListPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.data {
		if k >= string(o.Start) && (o.End == nil || k < string(o.End)) && (o.After == nil || k > string(o.After)) && strings.HasPrefix(k, string(o.Prefix)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var p kv.ListPage
	for i, k := range keys {
		if i == o.Limit {
			p.More = true
			break
		}
		// As the coordinator's listing: keys only carries no value nor
		// version.
		e := kv.Entry{Key: []byte(k)}
		if !o.KeysOnly {
			e.Value, e.Version = f.data[k].Data, f.data[k].Version
			f.valuesListed++
		}
		if o.Terms && !o.KeysOnly {
			e.Terms = f.data[k].Index
		}
		p.Entries = append(p.Entries, e)
		p.Last = e.Key
	}
	f.lists++
	return p, nil
}

func (f *fakeBackend) Status() kv.NodeStatus { return kv.NodeStatus{NodeID: 1} }

func (f *fakeBackend) Cluster(context.Context) kv.ClusterInfo {
	return kv.ClusterInfo{NodeID: 1, Members: []kv.MemberInfo{
		{NodeID: 1, PeerAddr: "127.0.0.1:9080", HTTPAddr: "127.0.0.1:8080"},
		{NodeID: 2, PeerAddr: "127.0.0.1:9081", HTTPAddr: "127.0.0.1:8081"},
	}, Shards: []kv.ShardInfo{{ID: 1, Leader: 2, Term: 3, Applied: 40, Commit: 41}}}
}

func newTestServer(t *testing.T) (*Server, *fakeBackend) {
	t.Helper()
	f := newFake()
	s, err := New(f, Config{ClusterID: 7, MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}
