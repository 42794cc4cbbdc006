package bench

import (
	"math"
	"math/rand"
)

// zipfian draws integers in [0, n) with the YCSB zipfian distribution
// (constant 0.99, Gray et al., "Quickly generating billion-record synthetic
// databases"): item 0 is the most popular.
type zipfian struct {
	n                        uint64
	theta, alpha, zetan, eta float64
	half                     float64 // 1 + 0.5^theta
}

const zipfConstant = 0.99

func zeta(n uint64, theta float64) float64 {
	s := 0.0
	for i := uint64(1); i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

func newZipfian(n uint64) *zipfian {
	if n == 0 {
		n = 1
	}
	theta := zipfConstant
	z := &zipfian{n: n, theta: theta, zetan: zeta(n, theta)}
	zeta2 := zeta(2, theta)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/z.zetan)
	z.half = 1 + math.Pow(0.5, theta)
	return z
}

func (z *zipfian) next(r *rand.Rand) uint64 {
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.half {
		return 1
	}
	v := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= z.n {
		v = z.n - 1
	}
	return v
}

// fnv64 scrambles a key number so popular items spread over the key space
// (YCSB's "scrambled zipfian" and hashed insert order).
func fnv64(v uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= 0x100000001b3
		v >>= 8
	}
	return h
}

// keyChooser picks record numbers in [0, n).
type keyChooser interface {
	pick(r *rand.Rand, n uint64) uint64
}

type uniformChooser struct{}

func (uniformChooser) pick(r *rand.Rand, n uint64) uint64 { return uint64(r.Int63n(int64(max(n, 1)))) }

// scrambledZipf: zipfian popularity, popular items scattered by hashing.
type scrambledZipf struct{ z *zipfian }

func (s scrambledZipf) pick(r *rand.Rand, n uint64) uint64 { return fnv64(s.z.next(r)) % max(n, 1) }

// latestChooser: zipfian over recency — the newest records are the most
// popular (YCSB D).
type latestChooser struct{ z *zipfian }

func (l latestChooser) pick(r *rand.Rand, n uint64) uint64 {
	off := l.z.next(r) % max(n, 1)
	return n - 1 - off
}
