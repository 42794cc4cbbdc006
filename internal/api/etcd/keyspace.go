package etcdapi

import (
	"bytes"
	"context"

	"github.com/cairn-db/cairn/internal/kv"
)

// etcd keys are any non-empty byte strings, while Cairn keeps the keys
// beginning with byte 0x00 for its own records ("\x00sys/…",
// "\x00etcd-lease/…"). So the etcd API stores an etcd key that begins
// with 0x00 under 0x00 0xFF followed by the rest of the key, and every
// other key as it is. The mapping keeps key order (all escaped keys sort
// together where the keys beginning with 0x00 did, before 0x01), so
// ranges, listings and watches over it stay ranges; and no escaped key is
// a Cairn record, whose second byte is never 0xFF. etcd's benchmark tool
// writes such keys (its keys are varints, key 0 is all zero bytes).
//
// Such keys are not reachable through the HTTP API, which refuses every
// key beginning with 0x00 (docs/etcd-api.md).

// escapeMark follows 0x00 in a stored etcd key that began with 0x00.
const escapeMark = 0xFF

// userStart is the first stored key of the etcd key space: everything
// below it that begins with 0x00 is Cairn's own.
var userStart = []byte{0, escapeMark}

// storedKey is where etcd key k is stored.
func storedKey(k []byte) []byte {
	if len(k) == 0 || k[0] != 0 {
		return k
	}
	out := make([]byte, 0, len(k)+1)
	out = append(out, 0, escapeMark)
	return append(out, k[1:]...)
}

// etcdKey is the etcd key stored at k; ok is false for Cairn's own
// records, which the etcd API never shows.
func etcdKey(k []byte) (key []byte, ok bool) {
	switch {
	case len(k) == 0:
		return nil, false
	case k[0] != 0:
		return k, true
	case len(k) < 2 || k[1] != escapeMark:
		return nil, false
	}
	out := make([]byte, 0, len(k)-1)
	out = append(out, 0)
	return append(out, k[2:]...), true
}

// userSpace is a Backend over the etcd key space: keys in, keys out and
// the keys of history events are etcd keys; Cairn's own records are out
// of its reach. The lease code reaches them through the raw Backend.
type userSpace struct{ Backend }

func (u userSpace) Get(ctx context.Context, key []byte, opts kv.ReadOptions) (kv.Value, error) {
	return u.Backend.Get(ctx, storedKey(key), opts)
}

func (u userSpace) Put(ctx context.Context, key, value []byte, opts kv.WriteOptions) (uint64, bool, error) {
	return u.Backend.Put(ctx, storedKey(key), value, opts)
}

func (u userSpace) Delete(ctx context.Context, key []byte, opts kv.WriteOptions) (uint64, error) {
	return u.Backend.Delete(ctx, storedKey(key), opts)
}

// List lists etcd keys: its bounds are mapped and never reach below
// userStart, and the entries come back under their etcd keys.
func (u userSpace) List(ctx context.Context, opts kv.ListOptions) (kv.ListPage, error) {
	if len(opts.Prefix) > 0 {
		opts.Prefix = storedKey(opts.Prefix)
	}
	opts.Start = storedKey(opts.Start)
	if len(opts.Prefix) == 0 && bytes.Compare(opts.Start, userStart) < 0 {
		opts.Start = userStart
	}
	if opts.End != nil {
		opts.End = storedKey(opts.End)
	}
	if opts.After != nil {
		opts.After = storedKey(opts.After)
	}
	page, err := u.Backend.List(ctx, opts)
	if err != nil {
		return page, err
	}
	out := page.Entries[:0]
	for _, e := range page.Entries {
		if k, ok := etcdKey(e.Key); ok {
			e.Key = k
			out = append(out, e)
		}
	}
	page.Entries = out
	if page.Last != nil {
		if k, ok := etcdKey(page.Last); ok {
			page.Last = k
		}
	}
	return page, nil
}

func (u userSpace) WatchShards(key, end []byte) []uint64 {
	if end != nil {
		end = storedKey(end)
	}
	return u.Backend.WatchShards(storedKey(key), end)
}

// ShardEvents reads a shard's history with Cairn's own records left out
// and the other keys as etcd keys.
func (u userSpace) ShardEvents(id, from uint64, maxBytes int) (kv.HistoryPage, <-chan struct{}, error) {
	page, changed, err := u.Backend.ShardEvents(id, from, maxBytes)
	if err != nil {
		return page, changed, err
	}
	out := page.Events[:0]
	for _, e := range page.Events {
		if k, ok := etcdKey(e.Key); ok {
			e.Key = k
			out = append(out, e)
		}
	}
	page.Events = out
	return page, changed, nil
}
