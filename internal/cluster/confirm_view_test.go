package cluster

import (
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
)

// confirmView accepts a view only when it covers the whole ring and a
// majority of every shard's voters reported their replicas.
func TestConfirmView(t *testing.T) {
	half := uint64(1) << 63
	lower := shard.Descriptor{ID: 1, Start: 0, End: half, Replicas: []uint64{1, 2, 3}, Epoch: 1}
	upper := shard.Descriptor{ID: 2, Start: half, End: 0, Replicas: []uint64{2, 3, 4}, Epoch: 1}
	// reported: shard -> the nodes that reported it.
	all := map[uint64]map[uint64]bool{1: {2: true, 3: true}, 2: {2: true, 3: true, 4: true}}
	for _, c := range []struct {
		name     string
		view     []shard.Descriptor
		reported map[uint64]map[uint64]bool
		ok       bool
	}{
		{"whole ring, every member", []shard.Descriptor{lower, upper}, all, true},
		{"the upper half unknown", []shard.Descriptor{lower}, all, false},
		{"the lower half unknown", []shard.Descriptor{upper}, all, false},
		{"shard 2 reported by one voter of three", []shard.Descriptor{lower, upper}, map[uint64]map[uint64]bool{1: {2: true, 3: true}, 2: {2: true}}, false},
		{"shard 1 by node 1 (itself) and node 2", []shard.Descriptor{lower, upper}, map[uint64]map[uint64]bool{1: {2: true}, 2: {2: true, 4: true}}, true},
		{"shard 2 unreported by its voters 2 and 3", []shard.Descriptor{lower, upper}, map[uint64]map[uint64]bool{1: {2: true, 3: true}, 2: {4: true}}, false},
	} {
		err := confirmView(c.view, c.reported, 1)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
