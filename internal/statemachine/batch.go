package statemachine

import (
	"sort"

	"github.com/cairn-db/cairn/internal/storage"
)

// applyBatch holds the writes of one apply round as an overlay on the
// engine, so reads see the logical state (engine + earlier commands of the
// round), and commits them in key order: Pebble inserts a sorted batch
// into its memtable far faster than one whose keys jump between the data
// and the dedup table, as each key's place is found from the previous
// one's.
type applyBatch struct {
	eng *storage.Engine
	ov  map[string][]byte // the round's last write of each key; nil: deleted
	// ranges deleted in this round (before any write in ov).
	ranges [][2]string
	// groups: the dedup groups of the entry being applied (shard, index)
	// by bucket, set into ov when the next entry starts or at commit.
	groups       map[uint64][]byte
	shard, index uint64
	// The round's history events (history.go), in the order of their
	// keys, encoded one after the other in evBuf. Their keys sort after
	// every other key a round writes (storage.HistoryKey's prefix is the
	// highest), so commit writes them last, without the map and the sort.
	evShard uint64
	evBuf   []byte
	evs     []eventRef
}

// eventRef places one history event of the round.
type eventRef struct {
	index    uint64
	pos      uint32
	off, end int // its encoding is evBuf[off:end]
}

func newApplyBatch(eng *storage.Engine) *applyBatch {
	return &applyBatch{eng: eng, ov: map[string][]byte{}}
}

func (a *applyBatch) Get(k []byte) ([]byte, error) {
	if v, ok := a.ov[string(k)]; ok {
		if v == nil {
			return nil, storage.ErrNotFound
		}
		return v, nil
	}
	if a.inRange(string(k)) {
		return nil, storage.ErrNotFound
	}
	return a.eng.Get(k)
}

func (a *applyBatch) inRange(k string) bool {
	for _, rg := range a.ranges {
		if k >= rg[0] && k < rg[1] {
			return true
		}
	}
	return false
}

// Set writes k=v; the batch keeps v (the caller must not change it).
func (a *applyBatch) Set(k, v []byte) { a.ov[string(k)] = v }

func (a *applyBatch) Delete(k []byte) { a.ov[string(k)] = nil }

// DeleteRange deletes [start, end) from the engine's view and the round's
// writes so far.
func (a *applyBatch) DeleteRange(start, end []byte) {
	for k := range a.ov {
		if k >= string(start) && k < string(end) {
			a.ov[k] = nil
		}
	}
	a.ranges = append(a.ranges, [2]string{string(start), string(end)})
}

// commit writes the round without fsync: its range deletions, then every
// key's last write in key order. Writes after a range deletion that
// covers them are in ov and so come after it; a key deleted by a range
// needs no point deletion of its own.
func (a *applyBatch) commit() error {
	a.setGroups()
	b := a.eng.NewBatch()
	for _, rg := range a.ranges {
		b.DeleteRange([]byte(rg[0]), []byte(rg[1]))
	}
	keys := make([]string, 0, len(a.ov))
	for k := range a.ov {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := a.ov[k]; {
		case v != nil:
			b.Set([]byte(k), v)
		case !a.inRange(k):
			b.Delete([]byte(k))
		}
	}
	var key []byte
	for _, ev := range a.evs {
		key = storage.AppendHistoryKey(key[:0], a.evShard, ev.index, ev.pos)
		b.Set(key, a.evBuf[ev.off:ev.end]) // the batch copies both
	}
	return b.Commit(false)
}

// addEvent adds the history event at (index, pos) of shard; events come
// in the order of their keys (and of one shard: a round is one shard's).
func (a *applyBatch) addEvent(shard, index uint64, pos uint32, e *Event) {
	a.evShard = shard
	off := len(a.evBuf)
	a.evBuf = appendEvent(a.evBuf, e)
	a.evs = append(a.evs, eventRef{index: index, pos: pos, off: off, end: len(a.evBuf)})
}

// dropEventsThrough drops the round's events at or below index (a range
// deletion of the round trims them).
func (a *applyBatch) dropEventsThrough(index uint64) {
	n := 0
	for n < len(a.evs) && a.evs[n].index <= index {
		n++
	}
	a.evs = a.evs[n:]
}

// entry starts the dedup groups of the entry at index of shard, first
// setting those of the previous entry, if it was another.
func (a *applyBatch) entry(shard, index uint64) {
	if a.shard != shard || a.index != index {
		a.setGroups()
		a.shard, a.index = shard, index
	}
}

// setGroups writes the pending dedup groups into the round.
func (a *applyBatch) setGroups() {
	for bucket, g := range a.groups {
		a.Set(storage.DedupKey(a.shard, bucket, a.index), g)
	}
	clear(a.groups)
}

// dropGroupsBelow drops the pending groups of buckets below limit (the
// round's range deletion of those buckets must cover them too).
func (a *applyBatch) dropGroupsBelow(limit uint64) {
	for bucket := range a.groups {
		if bucket < limit {
			delete(a.groups, bucket)
		}
	}
}
