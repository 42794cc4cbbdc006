package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/cairn-db/cairn/internal/kv"
)

// A shard that splits while watches are open: a watch on a key that
// moved to the new shard, and a range watch (whose shards no longer
// cover every key), would otherwise go on reading the old shard and
// never report the moved keys' changes. Both end as compacted, after the
// old shard's events, at the new shard's first revision; a watch from
// that revision on reports the key's changes exactly.
func TestWatchEndsAtASplit(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	f.set("k", "1") // 1
	one := create(t, st, &pb.WatchCreateRequest{Key: []byte("k")})
	rng := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("z")})
	stays := create(t, st, &pb.WatchCreateRequest{Key: []byte("m")})
	f.set("k", "2") // 2, in shard 1: both watches report it
	for range 2 {
		if r := recv(t, st); evs(r) != "PUT k=2@2" || (r.WatchId != one.WatchId && r.WatchId != rng.WatchId) {
			t.Fatalf("before the split: %v", r)
		}
	}
	// The split, at index 3: k moves to shard 2, whose history starts
	// there.
	f.mu.Lock()
	f.index++
	f.shardOf = func(key []byte) uint64 {
		if string(key) == "k" {
			return 2
		}
		return 1
	}
	f.shards = []uint64{1, 2}
	f.floors = map[uint64]uint64{2: 3}
	f.mu.Unlock()
	f.set("k", "3") // 4, in shard 2
	ended := map[int64]bool{}
	for len(ended) < 2 {
		r := recv(t, st)
		if !r.Canceled || r.CompactRevision != 4 || len(r.Events) != 0 {
			t.Fatalf("after the split: %v, want the watches canceled with compact revision 4", r)
		}
		ended[r.WatchId] = true
	}
	if !ended[one.WatchId] || !ended[rng.WatchId] {
		t.Fatalf("canceled %v, want watches %d and %d", ended, one.WatchId, rng.WatchId)
	}
	f.set("m", "1") // 5, in shard 1
	if r := recv(t, st); r.WatchId != stays.WatchId || evs(r) != "PUT m=1@5" {
		t.Fatalf("watch of a key that stayed: %v", r)
	}
	// Resumed from the compact revision: the key's change in its new shard.
	again := create(t, st, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 4})
	if r := recv(t, st); r.WatchId != again.WatchId || evs(r) != "PUT k=3@4" {
		t.Fatalf("watch from the compact revision: %v", r)
	}
}

// This node's view can show a split (a peer told it) before its replica
// of the old shard has applied it: the watch on a moved key still gets
// the key's last change in the old shard, applied after the pump's last
// read, before it ends as compacted at the new shard's first revision.
func TestWatchSplitSeenBeforeTheOldShardApplied(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	f.set("k", "1") // 1
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("k")})
	f.mu.Lock()
	f.shardOf = func([]byte) uint64 { return 2 }
	f.shards = []uint64{1, 2}
	f.floors = map[uint64]uint64{2: 3}
	seen := f.lookups
	f.afterRead = func(id uint64) {
		if id != 1 || f.lookups == seen {
			return // not yet the pump's read after it saw the split
		}
		f.afterRead = nil
		// Shard 1's replica applies k's last write there (2), then the
		// split (3).
		f.index++
		f.recordIn(1, kv.Event{Index: f.index, Key: []byte("k"), Value: []byte("late"), PrevVersion: 1, PrevValue: []byte("1")})
		f.index++
	}
	f.mu.Unlock()
	if r := recv(t, st); r.WatchId != c.WatchId || evs(r) != "PUT k=late@2" {
		t.Fatalf("the key's last change in the old shard: %v", r)
	}
	if r := recv(t, st); r.WatchId != c.WatchId || !r.Canceled || r.CompactRevision != 4 {
		t.Fatalf("after the split: %v, want canceled with compact revision 4", r)
	}
}
