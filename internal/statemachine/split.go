package statemachine

import (
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
)

// CopyDedup adds to b a copy of shard from's dedup table and shard clock,
// as read from the engine, under shard to's keys: the state a split's new
// half starts with. Records name no key (a fingerprint only), so the new
// shard cannot tell its own apart and takes them all: a retry of a write
// the parent applied before the split then finds its record on whichever
// half owns the key now, and dedup stays exact across the split. The
// records of keys that stayed in the parent are never looked up by a
// retry on the new shard, and expire with the clock like any other.
// The caller commits b; it returns the bytes copied.
func CopyDedup(eng *storage.Engine, b *storage.Batch, from, to uint64) (int, error) {
	src := storage.DedupPrefix(from)
	dst := storage.DedupPrefix(to)
	it, err := eng.NewIter(src, storage.PrefixEnd(src))
	if err != nil {
		return 0, fmt.Errorf("statemachine: copy dedup of shard %d: %w", from, err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		nk := make([]byte, 0, len(dst)+len(k)-len(src))
		nk = append(append(nk, dst...), k[len(src):]...)
		b.Set(nk, it.Value())
		n += len(k) + len(it.Value())
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("statemachine: copy dedup of shard %d: %w", from, err)
	}
	return n, nil
}
