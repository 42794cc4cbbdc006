package replica

import (
	"sort"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cespare/xxhash/v2"
)

// The dedup table remembers the result of every write by request id, so a
// retried write applies at most once. Its records live in Pebble (they are
// replicated state, in snapshots) under the time bucket of the write's
// proposer clock (Command.UnixNano): a record is one key, and a whole
// bucket is dropped with one range deletion once every record in it is
// older than DedupTTL — a rule on the log, so every replica drops the same
// records at the same entry. A bucket spans a quarter of DedupTTL (30 s of
// the default 2 minutes), so a record lives between DedupTTL and 1.25
// times it; DedupTTL must be the same on every node.
const dedupBucketsPerTTL = 4

// dedupBucket is the bucket of a proposer time.
func (r *Replica) dedupBucket(unixNano int64) uint64 {
	width := max(int64(r.cfg.DedupTTL)/dedupBucketsPerTTL, 1)
	if unixNano < 0 {
		return 0
	}
	return uint64(unixNano / width)
}

// dedupFilter holds, per live bucket of a replica's dedup table, a Bloom
// filter of the request ids recorded there. Nearly every write is a first
// attempt whose id has no record: the filters say so without a Pebble
// read. A possible hit (a retry, or a false positive) reads the record
// from Pebble, which stays the source of truth, so the filter changes no
// answer. A write is checked against every live bucket (up to five) and
// every segment of their filters, so the false positive rates add up
// (and each false positive costs a Pebble read):
// a segment costs 20 bits per id (about 0.03 % false positives when
// full), the first holds 16384 ids, and a new bucket's filter starts at
// the size the bucket before it reached, so a steady load fills one
// segment per bucket. The filter is
// rebuilt from the engine when the replica opens and after a snapshot.
type dedupFilter struct {
	buckets map[uint64]*bloom
	// order lists the live buckets in ascending order.
	order []uint64
}

// load replaces the filter with the shard's records in eng.
func (d *dedupFilter) load(eng *storage.Engine, shardID uint64) error {
	*d = dedupFilter{}
	p := storage.DedupPrefix(shardID)
	it, err := eng.NewIter(p, storage.PrefixEnd(p))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		bucket, id, err := storage.DecodeDedupKey(it.Key())
		if err != nil {
			continue
		}
		d.add(bucket, xxhash.Sum64(id))
	}
	return it.Close()
}

// candidates appends to out the buckets that may hold a record of the id
// with hash h.
func (d *dedupFilter) candidates(h uint64, out []uint64) []uint64 {
	for _, b := range d.order {
		if d.buckets[b].mayHave(h) {
			out = append(out, b)
		}
	}
	return out
}

// add notes a record of the id with hash h in bucket.
func (d *dedupFilter) add(bucket, h uint64) {
	f := d.buckets[bucket]
	if f == nil {
		if d.buckets == nil {
			d.buckets = map[uint64]*bloom{}
		}
		// Buckets span equal times: the latest one's count is the
		// best guess of this one's.
		hint := 0
		if n := len(d.order); n > 0 {
			hint = d.buckets[d.order[n-1]].count()
		}
		f = &bloom{firstCap: hint}
		d.buckets[bucket] = f
		i := sort.Search(len(d.order), func(i int) bool { return d.order[i] > bucket })
		d.order = append(d.order, 0)
		copy(d.order[i+1:], d.order[i:])
		d.order[i] = bucket
	}
	f.add(h)
}

// dropBelow forgets the buckets below limit.
func (d *dedupFilter) dropBelow(limit uint64) {
	n := 0
	for n < len(d.order) && d.order[n] < limit {
		delete(d.buckets, d.order[n])
		n++
	}
	d.order = d.order[n:]
}

// bloom is a growing blocked Bloom filter: segments of 512-bit blocks,
// each new segment twice the capacity of the last, so it needs no size
// up front. One lookup reads one cache line per segment.
type bloom struct {
	segs []bloomSeg
	// firstCap is the first segment's capacity (at least bloomFirstCap).
	firstCap int
}

type bloomSeg struct {
	blocks   [][8]uint64
	n, limit int
}

const (
	bloomBitsPerKey = 20
	bloomProbes     = 7
	bloomFirstCap   = 16384
)

// count is the number of hashes added.
func (b *bloom) count() int {
	n := 0
	for i := range b.segs {
		n += b.segs[i].n
	}
	return n
}

func (b *bloom) add(h uint64) {
	if len(b.segs) == 0 || b.segs[len(b.segs)-1].n >= b.segs[len(b.segs)-1].limit {
		c := max(bloomFirstCap, b.firstCap)
		if len(b.segs) > 0 {
			c = 2 * b.segs[len(b.segs)-1].limit
		}
		b.segs = append(b.segs, bloomSeg{blocks: make([][8]uint64, (c*bloomBitsPerKey+511)/512), limit: c})
	}
	s := &b.segs[len(b.segs)-1]
	blk := s.block(h)
	p := probeBits(h)
	for i := 0; i < bloomProbes; i, p = i+1, p>>9 {
		bit := p & 511
		blk[bit>>6] |= 1 << (bit & 63)
	}
	s.n++
}

func (b *bloom) mayHave(h uint64) bool {
	probes := probeBits(h)
	for i := range b.segs {
		blk := b.segs[i].block(h)
		hit := true
		for j, p := 0, probes; j < bloomProbes; j, p = j+1, p>>9 {
			bit := p & 511
			if blk[bit>>6]&(1<<(bit&63)) == 0 {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}

// probeBits is where hash h sets its bits in its block: bloomProbes
// 9-bit fields of one remix of h (independent of the block choice, which
// uses another).
func probeBits(h uint64) uint64 {
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	return h ^ h>>29
}

// block picks the block of hash h from its high bits (mixed, so the
// probes, which use other bits, stay independent of the block).
func (s *bloomSeg) block(h uint64) *[8]uint64 {
	m := (h ^ h>>29) * 0xbf58476d1ce4e5b9
	return &s.blocks[(m>>32)*uint64(len(s.blocks))>>32]
}

// versionCache remembers the current version of recently written keys of
// a replica (0: absent), so applying a write to a hot key needs no Pebble
// read to learn whether it exists and at which version. Apply keeps it
// exact: every write of a data key goes through it, and a snapshot clears
// it. At most max keys; a full cache drops the key it took in longest ago
// (a ring of the keys in the order they came in: no map iteration).
type versionCache struct {
	m    map[string]uint64
	max  int
	ring []string // keys in the order they came in; next goes to ring[pos]
	pos  int
}

func (c *versionCache) get(key []byte) (version uint64, known bool) {
	version, known = c.m[string(key)]
	return version, known
}

func (c *versionCache) put(key []byte, version uint64) {
	if c.max <= 0 {
		return
	}
	if c.m == nil {
		c.m = make(map[string]uint64, c.max)
		c.ring = make([]string, 0, c.max)
	}
	if _, ok := c.m[string(key)]; ok {
		c.m[string(key)] = version
		return
	}
	k := string(key)
	if len(c.ring) < c.max {
		c.ring = append(c.ring, k)
	} else {
		delete(c.m, c.ring[c.pos])
		c.ring[c.pos] = k
		c.pos = (c.pos + 1) % c.max
	}
	c.m[k] = version
}

func (c *versionCache) reset() {
	clear(c.m)
	c.ring, c.pos = c.ring[:0], 0
}
