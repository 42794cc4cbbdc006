package statemachine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"github.com/cespare/xxhash/v2"
)

// The dedup table remembers the result of every write by request id, so a
// retried write applies at most once. Its records live in Pebble (they are
// replicated state, in snapshots) under the bucket of the shard clock
// (clock.go) at the write's entry, a group per entry: one key holds the
// records of all the entry's commands, so a
// write adds some 28 bytes to a key shared with the others of its entry
// instead of a key of its own (which Pebble inserts, flushes and compacts
// over and over while it lives). A whole bucket is dropped with one range
// deletion once every record in it is older than DedupTTL by the shard
// clock — a rule on the log, so every replica drops the same records at
// the same entry. A bucket spans a quarter of DedupTTL (30 s of the
// default 2 minutes), so a record lives between DedupTTL and 1.25 times it
// of shard clock time; DedupTTL must be the same on every node.
const dedupBucketsPerTTL = 4

// dedupBucket is the bucket of a shard clock time.
func (m *Machine) dedupBucket(clock uint64) uint64 {
	return clock / max(uint64(m.cfg.DedupTTL)/dedupBucketsPerTTL, 1)
}

// A group's value is its records back to back, each the request id and
// the result (see encodeDedupResult), both length-prefixed (uvarint).
func appendDedupRecord(g, reqID, result []byte) []byte {
	g = binary.AppendUvarint(g, uint64(len(reqID)))
	g = append(g, reqID...)
	g = binary.AppendUvarint(g, uint64(len(result)))
	return append(g, result...)
}

// A record's result is the command's fingerprint (8 bytes, big-endian)
// and then its wire.Result, so a command that reuses the request id of
// another is told apart from a retry.
func encodeDedupResult(fp uint64, res wire.Result) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 24), fp), res.Marshal()...)
}

func decodeDedupResult(b []byte) (fp uint64, res wire.Result, err error) {
	if len(b) < 8 {
		return 0, res, fmt.Errorf("%w: dedup record", storage.ErrCorrupt)
	}
	if err := res.Unmarshal(b[8:]); err != nil {
		return 0, res, fmt.Errorf("%w: dedup record: %v", storage.ErrCorrupt, err)
	}
	return binary.BigEndian.Uint64(b), res, nil
}

// eachDedupRecord calls f with each record of group g, in order, until f
// returns false.
func eachDedupRecord(g []byte, f func(reqID, result []byte) bool) error {
	for len(g) > 0 {
		var id, res []byte
		var ok bool
		if id, g, ok = cutUvarintBytes(g); !ok {
			return fmt.Errorf("%w: dedup group", storage.ErrCorrupt)
		}
		if res, g, ok = cutUvarintBytes(g); !ok {
			return fmt.Errorf("%w: dedup group", storage.ErrCorrupt)
		}
		if !f(id, res) {
			return nil
		}
	}
	return nil
}

func cutUvarintBytes(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// findDedupRecord returns the result recorded for reqID in group g.
func findDedupRecord(g, reqID []byte) (result []byte, found bool) {
	_ = eachDedupRecord(g, func(id, res []byte) bool {
		if bytes.Equal(id, reqID) {
			result, found = res, true
		}
		return !found
	})
	return result, found
}

// dedupIndex tells, for a request id's hash, which groups hold a record
// of it. Per live bucket it keeps a Bloom filter of the hashes and every
// (hash, entry index) pair: the newest up to dedupRun of them as they
// came, the others in runs of dedupRun sorted by hash. A write checks
// every live bucket (up to five): nearly always the filter rules it out;
// otherwise a binary search of each run and a scan of the newest pairs
// find the groups with the hash, and only those are read from Pebble.
// A pair is 8 bytes: the hash's high 32 bits and the entry index less the
// bucket's first. So a group is read for a retry, or rarely for another
// id that passed the filter and shares those 32 bits, which the group's
// records tell apart. It is exact, at 8 bytes and 20 bits of memory per
// live record (a map would take several times that, and an insert into a
// large map misses the cache); it is rebuilt from the engine when the
// replica opens and after a snapshot.
type dedupIndex struct {
	buckets map[uint64]*dedupBucketIndex
	// order lists the live buckets in ascending order.
	order []uint64
}

type dedupBucketIndex struct {
	filter bloom
	base   uint64        // the entry index of the bucket's first pair
	tail   []dedupPair   // the newest pairs, in the order they came
	runs   [][]dedupPair // full runs, each sorted by hash, then offset
	// far: the pairs whose index is not within 2^32 above base, whole
	// (none in practice: that takes four billion entries).
	far []dedupFar
}

type dedupFar struct{ hash, index uint64 }

// dedupPair is a record's hash (its high 32 bits) and its entry's index
// (less the bucket's base).
type dedupPair struct{ hash, off uint32 }

// pairHash is the part of an id's hash that a pair keeps.
func pairHash(h uint64) uint32 { return uint32(h >> 32) }

// index is the entry index of a pair of bi.
func (bi *dedupBucketIndex) index(p dedupPair) uint64 { return bi.base + uint64(p.off) }

// dedupRun is the length of a sorted run of pairs.
const dedupRun = 1 << 15

// dedupRef names a group: the entry index within a bucket.
type dedupRef struct{ bucket, index uint64 }

// load replaces the index with the shard's groups in eng.
func (d *dedupIndex) load(eng *storage.Engine, shardID uint64) error {
	*d = dedupIndex{}
	p := storage.DedupPrefix(shardID)
	it, err := eng.NewIter(p, storage.PrefixEnd(p))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) == len(p) {
			continue // the shard clock (clockKey)
		}
		bucket, index, err := storage.DecodeDedupKey(it.Key())
		if err != nil {
			it.Close()
			return err
		}
		err = eachDedupRecord(it.Value(), func(id, _ []byte) bool {
			d.add(bucket, xxhash.Sum64(id), index)
			return true
		})
		if err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// candidates appends to out the groups that may hold a record of the id
// with hash h, oldest bucket first, each once.
func (d *dedupIndex) candidates(h uint64, out []dedupRef) []dedupRef {
	found := func(b, index uint64) {
		if n := len(out); n == 0 || out[n-1] != (dedupRef{b, index}) {
			out = append(out, dedupRef{b, index})
		}
	}
	h32 := pairHash(h)
	for _, b := range d.order {
		bi := d.buckets[b]
		if !bi.filter.mayHave(h) {
			continue
		}
		for _, run := range bi.runs {
			i := sort.Search(len(run), func(i int) bool { return run[i].hash >= h32 })
			for ; i < len(run) && run[i].hash == h32; i++ {
				found(b, bi.index(run[i]))
			}
		}
		for _, p := range bi.tail {
			if p.hash == h32 {
				found(b, bi.index(p))
			}
		}
		for _, p := range bi.far {
			if p.hash == h {
				found(b, p.index)
			}
		}
	}
	return out
}

// add notes a record of the id with hash h in the group of bucket and
// entry index. Groups come in index order.
func (d *dedupIndex) add(bucket, h, index uint64) {
	bi := d.buckets[bucket]
	if bi == nil {
		if d.buckets == nil {
			d.buckets = map[uint64]*dedupBucketIndex{}
		}
		// Buckets span equal times: the latest one's size is the best
		// guess of this one's.
		hint := 0
		if n := len(d.order); n > 0 {
			hint = d.buckets[d.order[n-1]].filter.count()
		}
		bi = &dedupBucketIndex{filter: bloom{firstCap: hint}, base: index}
		d.buckets[bucket] = bi
		i := sort.Search(len(d.order), func(i int) bool { return d.order[i] > bucket })
		d.order = append(d.order, 0)
		copy(d.order[i+1:], d.order[i:])
		d.order[i] = bucket
	}
	bi.filter.add(h)
	if index < bi.base || index-bi.base > math.MaxUint32 {
		bi.far = append(bi.far, dedupFar{h, index})
		return
	}
	if bi.tail == nil {
		bi.tail = make([]dedupPair, 0, dedupRun)
	}
	bi.tail = append(bi.tail, dedupPair{pairHash(h), uint32(index - bi.base)})
	if len(bi.tail) == dedupRun {
		slices.SortFunc(bi.tail, func(a, b dedupPair) int {
			if c := cmp.Compare(a.hash, b.hash); c != 0 {
				return c
			}
			return cmp.Compare(a.off, b.off)
		})
		bi.runs = append(bi.runs, bi.tail)
		bi.tail = nil
	}
}

// dropBelow forgets the buckets below limit.
func (d *dedupIndex) dropBelow(limit uint64) {
	n := 0
	for n < len(d.order) && d.order[n] < limit {
		delete(d.buckets, d.order[n])
		n++
	}
	d.order = d.order[n:]
}
