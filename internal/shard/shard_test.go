package shard

import (
	"errors"
	"math"
	"math/rand"
	"testing"
)

func TestBootstrapCoversRing(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 16, 64} {
		m, err := Bootstrap([]uint64{1, 2, 3}, n, 3)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(m.Shards) != n {
			t.Fatalf("n=%d: got %d shards", n, len(m.Shards))
		}
		for _, tok := range []uint64{0, 1, math.MaxUint64, math.MaxUint64 / 2} {
			d := m.Lookup(tok)
			if !d.Contains(tok) {
				t.Fatalf("n=%d: token %x looked up shard %d [%x,%x)", n, tok, d.ID, d.Start, d.End)
			}
		}
	}
}

func TestLookupMatchesLinearScan(t *testing.T) {
	m, _ := Bootstrap([]uint64{1, 2, 3}, 16, 3)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		tok := rng.Uint64()
		var want uint64
		for _, d := range m.Shards {
			if d.Contains(tok) {
				if want != 0 {
					t.Fatalf("token %x in two shards", tok)
				}
				want = d.ID
			}
		}
		if got := m.Lookup(tok).ID; got != want {
			t.Fatalf("token %x: got shard %d want %d", tok, got, want)
		}
	}
}

func TestEqualRanges(t *testing.T) {
	m, _ := Bootstrap([]uint64{1, 2, 3}, 16, 3)
	w := m.Shards[0].End - m.Shards[0].Start
	if w != 1<<60 {
		t.Fatalf("width %x want %x", w, uint64(1)<<60)
	}
	for _, d := range m.Shards[:15] {
		if d.End-d.Start != w {
			t.Fatalf("shard %d width %x", d.ID, d.End-d.Start)
		}
	}
}

func TestPlacementBalanced(t *testing.T) {
	nodes := []uint64{3, 1, 2, 4, 5}
	m, err := Bootstrap(nodes, 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[uint64]int{}
	preferred := map[uint64]int{}
	for i, d := range m.Shards {
		seen := map[uint64]bool{}
		for _, r := range d.Replicas {
			if seen[r] {
				t.Fatalf("shard %d has node %d twice", d.ID, r)
			}
			seen[r] = true
			replicas[r]++
		}
		preferred[d.Replicas[0]]++
		if want := uint64(i%5 + 1); d.Replicas[0] != want {
			t.Fatalf("shard %d prefers %d want %d", d.ID, d.Replicas[0], want)
		}
	}
	for _, id := range nodes {
		if replicas[id] != 12 || preferred[id] != 4 {
			t.Fatalf("node %d: %d replicas %d preferred, want 12 and 4", id, replicas[id], preferred[id])
		}
	}
}

func TestBootstrapErrors(t *testing.T) {
	cases := []struct {
		nodes []uint64
		n, rf int
	}{
		{[]uint64{1, 2, 3}, 0, 3},
		{[]uint64{1, 2, 3}, 4, 4},
		{[]uint64{1, 2, 3}, 4, 0},
		{[]uint64{1, 1, 3}, 4, 3},
		{[]uint64{0, 1, 3}, 4, 3},
	}
	for _, c := range cases {
		if _, err := Bootstrap(c.nodes, c.n, c.rf); !errors.Is(err, ErrBadBootstrap) {
			t.Errorf("%v n=%d rf=%d: err %v", c.nodes, c.n, c.rf, err)
		}
	}
}

func TestValidateRejectsGaps(t *testing.T) {
	m, _ := Bootstrap([]uint64{1}, 4, 1)
	m.Shards[1].Start++
	if err := m.Validate(); !errors.Is(err, ErrBadMap) {
		t.Fatalf("gap not detected: %v", err)
	}
}

func TestSplitPoint(t *testing.T) {
	for _, c := range []struct {
		d   Descriptor
		mid uint64
		ok  bool
	}{
		{Descriptor{Start: 0, End: 0}, 1 << 63, true},
		{Descriptor{Start: 1 << 63, End: 0}, 3 << 62, true},
		{Descriptor{Start: 0, End: 1 << 62}, 1 << 61, true},
		{Descriptor{Start: 10, End: 11 + 1<<20}, 10 + 1<<19, true},
		{Descriptor{Start: 0, End: MinSplitWidth - 1}, 0, false},
		{Descriptor{Start: ^uint64(0) - 5, End: 0}, 0, false},
	} {
		mid, ok := c.d.SplitPoint()
		if ok != c.ok || (ok && mid != c.mid) {
			t.Errorf("%+v: mid %#x %v, want %#x %v", c.d, mid, ok, c.mid, c.ok)
		}
		if ok && (!c.d.Contains(mid) || mid == c.d.Start) {
			t.Errorf("%+v: mid %#x not strictly inside", c.d, mid)
		}
	}
	d := Descriptor{ID: 3, Start: 100, End: 0, Replicas: []uint64{1, 2}, Learners: []uint64{4}, Epoch: 7}
	lo, hi := d.Halves(1 << 40)
	if lo.ID != 3 || lo.End != 1<<40 || lo.Epoch != 8 || hi.ID != 1<<40 || hi.Start != 1<<40 || hi.End != 0 || hi.Epoch != 8 ||
		len(hi.Replicas) != 2 || len(hi.Learners) != 1 {
		t.Fatalf("halves %+v %+v", lo, hi)
	}
	hi.Replicas[0] = 9
	if d.Replicas[0] != 1 {
		t.Fatal("halves share slices with the parent")
	}
}
