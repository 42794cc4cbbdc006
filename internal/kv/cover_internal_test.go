package kv

import (
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
)

func TestCoverGap(t *testing.T) {
	d := func(start, end uint64) shard.Descriptor { return shard.Descriptor{Start: start, End: end} }
	for _, c := range []struct {
		name string
		ds   []shard.Descriptor
		at   uint64
		gap  bool
	}{
		{"whole ring", []shard.Descriptor{d(0, 10), d(10, 20), d(20, 0)}, 0, false},
		{"nothing known", nil, 0, true},
		{"a narrowed shard, its upper half unknown", []shard.Descriptor{d(0, 10), d(15, 0)}, 10, true},
		{"the first tokens unowned", []shard.Descriptor{d(5, 0)}, 0, true},
		{"the ring's end unowned", []shard.Descriptor{d(0, 10), d(10, 20)}, 20, true},
		{"a stale wider shard overlapping its halves", []shard.Descriptor{d(0, 20), d(10, 20), d(20, 0)}, 0, false},
	} {
		at, gap := coverGap(c.ds)
		if gap != c.gap || gap && at != c.at {
			t.Errorf("%s: gap %v at %d, want %v at %d", c.name, gap, at, c.gap, c.at)
		}
	}
}
