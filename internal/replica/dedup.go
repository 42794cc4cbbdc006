package replica

import (
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cespare/xxhash/v2"
)

// dedupFilter counts, per 64-bit hash of a request id, the records a
// replica's dedup table holds (its DedupKey records in Pebble). Nearly
// every write is a first attempt whose id has no record: the filter says so
// without a Pebble read. A possible hit (a retry, or a hash collision)
// reads the record from Pebble, which stays the source of truth, so the
// filter changes no answer. It is loaded from the engine when the replica
// opens and after a snapshot is installed, and apply keeps it in step; it
// costs about 20 bytes per remembered id.
type dedupFilter struct {
	n map[uint64]uint32
}

// load replaces the filter with the shard's records in eng.
func (d *dedupFilter) load(eng *storage.Engine, shardID uint64) error {
	d.n = map[uint64]uint32{}
	p := storage.DedupPrefix(shardID)
	it, err := eng.NewIter(p, storage.PrefixEnd(p))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		d.n[xxhash.Sum64(it.Key()[len(p):])]++
	}
	return it.Close()
}

// mayHave is false when the table certainly holds no record for reqID.
func (d *dedupFilter) mayHave(reqID []byte) bool { return d.n[xxhash.Sum64(reqID)] > 0 }

// add counts a new record.
func (d *dedupFilter) add(reqID []byte) {
	if d.n == nil {
		d.n = map[uint64]uint32{}
	}
	d.n[xxhash.Sum64(reqID)]++
}

// remove uncounts a deleted record.
func (d *dedupFilter) remove(reqID []byte) {
	h := xxhash.Sum64(reqID)
	switch c := d.n[h]; c {
	case 0:
	case 1:
		delete(d.n, h)
	default:
		d.n[h] = c - 1
	}
}
