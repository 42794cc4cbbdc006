package etcdapi

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// Splits. A watcher reads the shards that held its keys when it was
// created. A split (docs/split.md) hands half of a shard's keys to a new
// shard, whose history starts at the split's index; the old shard records
// no change of those keys after it. A watcher that went on reading the old
// shard alone would never report them again, so each pump checks, every
// splitCheckInterval, that the shards holding the watcher's keys are
// still the ones it reads (one check for all of a watcher's pumps). When
// they are not, the pump first sends every event its shard's replica has
// applied, then ends the watcher as compacted at the new shard's first
// revision: the client re-reads, or watches again from that revision. For
// a watch on one key that pump is the old shard's, whose replica has
// applied the split once this node's view shows it: every event of the
// key up to the split has been sent, and a watch from the compact
// revision gets exactly the key's changes in its new shard. For a range
// it is whichever pump gets there first, and the other shards' latest
// events may be left unsent, as after any compaction.

// splitCheckInterval is how often a pump checks its watcher's shards.
const splitCheckInterval = time.Second

// splitCheck is a watcher's latest check of its shards.
type splitCheck struct {
	sync.Mutex
	at    time.Time // when it was made (the watcher's creation at first)
	found bool      // the shards changed: a split
}

// resharded reports whether the shards holding w's keys, in this node's
// view, are no longer the ones w reads. It asks b at most once per
// splitCheckInterval, for all of w's pumps: a watcher of a range has one
// pump per shard, and each check of a range walks every shard.
func (w *watcher) resharded(b Backend) bool {
	w.split.Lock()
	defer w.split.Unlock()
	if !w.split.found && time.Since(w.split.at) >= splitCheckInterval {
		w.split.at = time.Now()
		w.split.found = !slices.Equal(b.WatchShards(w.key, w.end), w.shards)
	}
	return w.split.found
}

// endSplit ends w after a split, from its pump of shard id, which has
// sent w's events below from: canceled as compacted at the first revision
// of the new shards now holding its keys (the highest, for a range over
// several). A node without a replica of such a shard ends the stream, and
// the client resumes the watch elsewhere. A node holds a replica of a new
// shard only once its replica of the old one has applied the split (the
// split creates it, and no other replica is created over a range a local
// replica still owns), and this node's view may have shown the split
// before (a peer told it): so the new shards' floors are read first, then
// the pump sends the events its replica has applied since, past the split.
func (ws *watchStream) endSplit(w *watcher, id, from uint64) {
	var compactRev uint64
	var added []uint64
	for _, nid := range ws.s.b.WatchShards(w.key, w.end) {
		if slices.Contains(w.shards, nid) {
			continue
		}
		floor, err := ws.historyFloor(nid)
		if err != nil {
			ws.fail(status.Error(codes.Unavailable, "cairn: "+err.Error()))
			return
		}
		compactRev = max(compactRev, floor+1)
		added = append(added, nid)
	}
	for {
		next, _, ok := ws.step(w, id, from)
		if !ok {
			return
		}
		if next == from {
			break
		}
		from = next
	}
	if compactRev == 0 {
		compactRev = w.progressRev() + 1
	}
	ws.compacted(w, compactRev, fmt.Sprintf("cairn: a shard split: shards %v now hold keys of this watch (watch again from the compact revision)", added))
}

// historyFloor is the floor of shard id's history on this node: its
// events from floor + 1 on are served.
func (ws *watchStream) historyFloor(id uint64) (uint64, error) {
	page, _, err := ws.s.b.ShardEvents(id, 1, 1)
	var ce *kv.CompactedError
	switch {
	case errors.As(err, &ce):
		return ce.Floor, nil
	case err != nil:
		return 0, err
	}
	return page.Floor, nil
}
