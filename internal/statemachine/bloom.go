package statemachine

// bloom is a growing blocked Bloom filter: segments of 512-bit blocks,
// each new segment twice the capacity of the last, so it needs no size
// up front. One lookup reads one cache line per segment. A write is
// checked against every live bucket's filter and every segment of it, so
// the false positive rates add up (each costs a search of the bucket's
// pairs): a segment costs 20 bits per id (about 0.03 % false positives
// when full), the first holds 16384 ids, and a new bucket's filter starts
// at the size the bucket before it reached, so a steady load fills one
// segment per bucket.
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
