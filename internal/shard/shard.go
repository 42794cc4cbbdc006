package shard

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"github.com/cespare/xxhash/v2"
)

// Token is the position of a key on the ring of 2^64 tokens.
func Token(key []byte) uint64 { return xxhash.Sum64(key) }

// Descriptor describes one shard. A shard owns tokens t with
// Start <= t < End; End == 0 means 2^64 (the shard owns the top of the ring).
type Descriptor struct {
	ID uint64 `json:"id"`
	// Start and End bound the owned token range (End exclusive, 0 = 2^64).
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	// Replicas are the voters' node ids; Replicas[0] is the preferred
	// leader. In a joint configuration (the middle of a move) it lists
	// the incoming voters first, then the outgoing ones.
	Replicas []uint64 `json:"replicas"`
	// Learners are node ids holding a non-voting replica (a replica being
	// added by a move, or a read replica), sorted.
	Learners []uint64 `json:"learners,omitempty"`
	// Epoch grows whenever the descriptor changes (every membership
	// change of the shard: learner added, promotion, removal; splits
	// later), so a stale routing decision can be detected.
	Epoch uint64 `json:"epoch"`
}

// Contains reports whether the shard owns token t.
func (d Descriptor) Contains(t uint64) bool {
	return t >= d.Start && (d.End == 0 || t < d.End)
}

// HasReplica reports whether node holds a replica of the shard, voter or
// learner.
func (d Descriptor) HasReplica(node uint64) bool {
	return d.IsVoter(node) || d.IsLearner(node)
}

// IsVoter reports whether node holds a voting replica of the shard.
func (d Descriptor) IsVoter(node uint64) bool {
	for _, r := range d.Replicas {
		if r == node {
			return true
		}
	}
	return false
}

// IsLearner reports whether node holds a learner (non-voting) replica.
func (d Descriptor) IsLearner(node uint64) bool {
	for _, r := range d.Learners {
		if r == node {
			return true
		}
	}
	return false
}

// Clone returns a copy of d sharing no slice with it.
func (d Descriptor) Clone() Descriptor {
	d.Replicas = append([]uint64(nil), d.Replicas...)
	if d.Learners != nil {
		d.Learners = append([]uint64(nil), d.Learners...)
	}
	return d
}

// Map is the set of shards, sorted by Start, covering the whole ring.
type Map struct {
	Shards []Descriptor `json:"shards"`
}

// Errors returned by this package.
var (
	ErrBadBootstrap = errors.New("shard: bad bootstrap parameters")
	ErrBadMap       = errors.New("shard: map does not cover the token ring")
)

// Bootstrap splits the ring into n equal ranges (the last absorbs the
// remainder) over the given nodes with rf replicas each. Shard i (0-based)
// gets replicas nodes[(i+j) mod len(nodes)] for j < rf, so every node holds
// the same number of replicas (±1) and shard i prefers nodes[i mod len].
// Shard ids start at 1.
func Bootstrap(nodes []uint64, n, rf int) (Map, error) {
	if n < 1 || n > 1<<16 {
		return Map{}, fmt.Errorf("%w: shards %d not in [1, 65536]", ErrBadBootstrap, n)
	}
	if rf < 1 || rf > len(nodes) {
		return Map{}, fmt.Errorf("%w: replication %d not in [1, %d nodes]", ErrBadBootstrap, rf, len(nodes))
	}
	seen := map[uint64]bool{}
	for _, id := range nodes {
		if id == 0 || seen[id] {
			return Map{}, fmt.Errorf("%w: node ids must be distinct and non-zero", ErrBadBootstrap)
		}
		seen[id] = true
	}
	sorted := append([]uint64(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	// width = floor(2^64 / n)
	var width uint64 // unused when n == 1: the single shard owns everything
	if n > 1 {
		width, _ = bits.Div64(1, 0, uint64(n))
	}
	m := Map{Shards: make([]Descriptor, n)}
	for i := 0; i < n; i++ {
		d := Descriptor{ID: uint64(i + 1), Start: uint64(i) * width, Epoch: 1}
		if i+1 < n {
			d.End = uint64(i+1) * width
		}
		for j := 0; j < rf; j++ {
			d.Replicas = append(d.Replicas, sorted[(i+j)%len(sorted)])
		}
		m.Shards[i] = d
	}
	return m, m.Validate()
}

// Validate checks that the shards are sorted, contiguous and cover the ring.
func (m Map) Validate() error {
	if len(m.Shards) == 0 {
		return fmt.Errorf("%w: no shards", ErrBadMap)
	}
	if m.Shards[0].Start != 0 {
		return fmt.Errorf("%w: first shard starts at %x", ErrBadMap, m.Shards[0].Start)
	}
	for i, d := range m.Shards {
		if d.ID == 0 || len(d.Replicas) == 0 {
			return fmt.Errorf("%w: shard %d has no id or replicas", ErrBadMap, i)
		}
		last := i == len(m.Shards)-1
		if last != (d.End == 0) {
			return fmt.Errorf("%w: shard %d end %x", ErrBadMap, d.ID, d.End)
		}
		if !last && (d.End <= d.Start || m.Shards[i+1].Start != d.End) {
			return fmt.Errorf("%w: gap or overlap after shard %d", ErrBadMap, d.ID)
		}
	}
	return nil
}

// Lookup returns the shard owning token t.
func (m Map) Lookup(t uint64) Descriptor {
	i := sort.Search(len(m.Shards), func(i int) bool {
		return m.Shards[i].End == 0 || t < m.Shards[i].End
	})
	return m.Shards[i]
}

// ForKey returns the shard owning key.
func (m Map) ForKey(key []byte) Descriptor { return m.Lookup(Token(key)) }

// Get returns the shard with the given id.
func (m Map) Get(id uint64) (Descriptor, bool) {
	for _, d := range m.Shards {
		if d.ID == id {
			return d, true
		}
	}
	return Descriptor{}, false
}

// FirstGap returns the first token of the ring that no range of items
// owns, items in the order of their starts (start, end as in Descriptor:
// end 0 is 2^64; ranges may overlap, as a stale wider shard does the
// halves it split into); gap is false when they own the whole ring.
func FirstGap[T any](items []T, span func(T) (start, end uint64)) (at uint64, gap bool) {
	next := uint64(0)
	for _, it := range items {
		start, end := span(it)
		if start > next {
			return next, true
		}
		if end == 0 {
			return 0, false
		}
		next = max(next, end)
	}
	return next, true
}
