package replica

import (
	"container/heap"

	"github.com/cairn-db/cairn/internal/storage"
)

// dedupIndex mirrors a replica's dedup table (its DedupKey and DedupAgeKey
// records in Pebble) in memory, so applying a write looks its request id
// up without a Pebble read, and pruning finds the oldest records without
// an iterator. Pebble stays the source of truth: the index is loaded from
// the engine when the replica opens and after a snapshot is installed, and
// apply changes both in step, so every replica's index holds exactly its
// replicated records.
type dedupIndex struct {
	recs map[string][]byte // request id -> record (proposer time, result)
	ages ageHeap           // every age key, oldest first; may repeat a key
}

// load replaces the index with the shard's records in eng.
func (d *dedupIndex) load(eng *storage.Engine, shardID uint64) error {
	d.recs = map[string][]byte{}
	d.ages = d.ages[:0]
	p := storage.DedupPrefix(shardID)
	it, err := eng.NewIter(p, storage.PrefixEnd(p))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		d.recs[string(it.Key()[len(p):])] = append([]byte(nil), it.Value()...)
	}
	if err := it.Close(); err != nil {
		return err
	}
	ap := storage.DedupAgePrefix(shardID)
	it, err = eng.NewIter(ap, storage.PrefixEnd(ap))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		d.ages = append(d.ages, string(it.Key())) // sorted: already a heap
	}
	return it.Close()
}

func (d *dedupIndex) get(reqID []byte) ([]byte, bool) {
	rec, ok := d.recs[string(reqID)]
	return rec, ok
}

func (d *dedupIndex) put(reqID []byte, rec []byte, ageKey []byte) {
	if d.recs == nil {
		d.recs = map[string][]byte{}
	}
	d.recs[string(reqID)] = rec
	heap.Push(&d.ages, string(ageKey))
}

// popOlder removes and returns up to max distinct age keys below limit,
// the smallest first — the same records, in the same order, that a scan of
// the engine's age keys would find.
func (d *dedupIndex) popOlder(limit string, max int) []string {
	var out []string
	for len(out) < max && len(d.ages) > 0 && d.ages[0] < limit {
		k := heap.Pop(&d.ages).(string)
		if len(out) > 0 && out[len(out)-1] == k {
			continue // recorded twice (an id retried after it was pruned)
		}
		out = append(out, k)
	}
	// Drop further copies of the last key so it is not returned again.
	for len(out) > 0 && len(d.ages) > 0 && d.ages[0] == out[len(out)-1] {
		heap.Pop(&d.ages)
	}
	return out
}

func (d *dedupIndex) remove(reqID []byte) { delete(d.recs, string(reqID)) }

// ageHeap is a min-heap of age keys (byte order = proposer time order).
type ageHeap []string

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h ageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ageHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *ageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
