package statemachine

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cespare/xxhash/v2"
)

func TestBloomHasNoFalseNegatives(t *testing.T) {
	var b bloom
	rng := rand.New(rand.NewSource(3))
	var in []uint64
	for i := 0; i < 100000; i++ {
		h := rng.Uint64()
		in = append(in, h)
		b.add(h)
	}
	for _, h := range in {
		if !b.mayHave(h) {
			t.Fatalf("added hash %x not found", h)
		}
	}
	fp := 0
	for i := 0; i < 100000; i++ {
		if b.mayHave(rng.Uint64()) {
			fp++
		}
	}
	// 20 bits per key in 512-bit blocks, 0.03 % per full segment; three
	// segments here.
	if fp > 200 {
		t.Fatalf("%d false positives in 100000", fp)
	}
	t.Logf("%d segments, %d false positives in 100000", len(b.segs), fp)
}

// A new bucket's filter starts at the size its predecessor reached, so a
// steady load keeps one segment per bucket (each segment adds its false
// positives to every lookup); the maps behind the filters make the index
// exact.
func TestDedupIndexSizesNewBucketFromLast(t *testing.T) {
	var d dedupIndex
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 50000; i++ {
		d.add(1, rng.Uint64(), uint64(i))
	}
	if n := len(d.buckets[1].filter.segs); n < 2 {
		t.Fatalf("first bucket has %d segments; want growth from %d", n, bloomFirstCap)
	}
	for i := 0; i < 50000; i++ {
		d.add(2, rng.Uint64(), uint64(i))
	}
	if n := len(d.buckets[2].filter.segs); n != 1 {
		t.Fatalf("second bucket has %d segments, want 1", n)
	}
	fp, found := 0, 0
	for i := 0; i < 100000; i++ {
		h := rng.Uint64()
		for _, b := range d.order {
			if d.buckets[b].filter.mayHave(h) {
				fp++
			}
		}
		found += len(d.candidates(h, nil))
	}
	if fp > 250 || found != 0 {
		t.Fatalf("%d filter passes and %d candidates in 100000 lookups of absent ids over two buckets", fp, found)
	}
	t.Logf("%d filter passes in 100000 lookups", fp)
}

// Pairs in sorted runs and in the unsorted tail are all found, with
// their entry index, and a group is named once however many of its ids
// share a hash.
func TestDedupIndexFindsRunsAndTail(t *testing.T) {
	var d dedupIndex
	rng := rand.New(rand.NewSource(9))
	n := 2*dedupRun + 1000
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = rng.Uint64()
		d.add(4, hashes[i], uint64(i/7)) // seven ids per group
	}
	if bi := d.buckets[4]; len(bi.runs) != 2 || len(bi.tail) != 1000 {
		t.Fatalf("%d runs and %d in the tail", len(bi.runs), len(bi.tail))
	}
	for i, h := range hashes {
		if got := d.candidates(h, nil); len(got) != 1 || got[0] != (dedupRef{4, uint64(i / 7)}) {
			t.Fatalf("hash %d: %v", i, got)
		}
	}
	// One hash in groups on both sides of a run's end.
	h := hashes[0]
	for i := 0; i < dedupRun; i++ {
		d.add(5, h, uint64(1000+i/(dedupRun-2)))
	}
	d.add(5, h, 1001)
	if got := d.candidates(h, nil); len(got) != 3 || got[0] != (dedupRef{4, 0}) || got[1] != (dedupRef{5, 1000}) || got[2] != (dedupRef{5, 1001}) {
		t.Fatalf("candidates %v", got)
	}
}

func TestDedupIndexDropsWholeBuckets(t *testing.T) {
	var d dedupIndex
	id := xxhash.Sum64String("retry")
	d.add(5, id, 50)
	d.add(9, id, 90)
	d.add(7, xxhash.Sum64String("other"), 70)
	want := []dedupRef{{5, 50}, {9, 90}}
	if got := d.candidates(id, nil); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	if got := d.candidates(xxhash.Sum64String("absent"), nil); len(got) != 0 {
		t.Fatalf("candidates of an absent id: %v", got)
	}
	d.dropBelow(8)
	if got := d.candidates(id, nil); len(got) != 1 || got[0] != want[1] {
		t.Fatalf("after dropping buckets below 8: %v", got)
	}
	if len(d.order) != 1 || len(d.buckets) != 1 {
		t.Fatalf("buckets left: %v", d.order)
	}
}

// Two ids of one hash in one bucket: both groups are candidates, and the
// group's records tell the ids apart.
func TestDedupIndexKeepsCollidingHashes(t *testing.T) {
	var d dedupIndex
	d.add(3, 42, 10)
	d.add(3, 42, 11)
	d.add(3, 42, 11) // a second id of the hash in the same group
	if got := d.candidates(42, nil); len(got) != 2 || got[0] != (dedupRef{3, 10}) || got[1] != (dedupRef{3, 11}) {
		t.Fatalf("candidates %v", got)
	}
	var g []byte
	g = appendDedupRecord(g, []byte("id-a"), []byte("result a"))
	g = appendDedupRecord(g, []byte(""), []byte("empty id"))
	g = appendDedupRecord(g, []byte("id-b"), nil)
	for id, want := range map[string]string{"id-a": "result a", "": "empty id", "id-b": ""} {
		if res, ok := findDedupRecord(g, []byte(id)); !ok || string(res) != want {
			t.Fatalf("%q: %q %v, want %q", id, res, ok, want)
		}
	}
	if _, ok := findDedupRecord(g, []byte("id-c")); ok {
		t.Fatal("found an id the group does not hold")
	}
	if err := eachDedupRecord(g[:len(g)-3], func(_, _ []byte) bool { return true }); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("a cut group: %v", err)
	}
}

// The version cache holds at most max keys and drops the one it took in
// longest ago; an update keeps a key's place; update changes only a key it
// holds; reset empties it.
func TestVersionCacheDropsOldest(t *testing.T) {
	c := versionCache{max: 3}
	for i, k := range []string{"a", "b", "c"} {
		c.put([]byte(k), uint64(i+1), nil, false, nil)
	}
	c.put([]byte("a"), 10, nil, false, nil) // an update: "a" stays the oldest
	c.put([]byte("d"), 4, nil, false, nil)
	if _, _, _, ok := c.get([]byte("a")); ok {
		t.Fatal("the oldest key was kept")
	}
	for k, want := range map[string]uint64{"b": 2, "c": 3, "d": 4} {
		if v, _, _, ok := c.get([]byte(k)); !ok || v != want {
			t.Fatalf("%s: %d %v, want %d", k, v, ok, want)
		}
	}
	c.put([]byte("e"), 5, nil, false, nil)
	if _, _, _, ok := c.get([]byte("b")); ok || len(c.m) != 3 {
		t.Fatalf("after a fifth key: b kept or %d keys", len(c.m))
	}
	c.update([]byte("c"), 30, nil, false, nil) // held: changed
	c.update([]byte("x"), 7, nil, false, nil)  // not held: not taken in
	if v, _, _, ok := c.get([]byte("c")); !ok || v != 30 {
		t.Fatalf("update of a held key: %d %v", v, ok)
	}
	if _, _, _, ok := c.get([]byte("x")); ok || len(c.m) != 3 {
		t.Fatalf("update took in a new key: %d keys", len(c.m))
	}
	c.reset()
	c.put([]byte("f"), 6, nil, false, nil)
	if _, _, _, ok := c.get([]byte("c")); ok || len(c.m) != 1 || len(c.slots) != 1 {
		t.Fatalf("after reset: %d keys, %d slots", len(c.m), len(c.slots))
	}
}

// A pair keeps the hash's high 32 bits: an id that shares them names its
// group as a candidate too (the group's records tell the ids apart), one
// that differs there does not. Indexes more than 2^32 above the bucket's
// first, or below it, are kept whole and found as well.
func TestDedupIndexPairsAndFarIndexes(t *testing.T) {
	var d dedupIndex
	a, b, c := uint64(0xabcd0123_00000001), uint64(0xabcd0123_ffffffff), uint64(0xabcd0124_00000001)
	d.add(2, a, 100)
	d.add(2, b, 101)
	d.add(2, c, 102)
	if got := d.candidates(a, nil); len(got) != 2 || got[0] != (dedupRef{2, 100}) || got[1] != (dedupRef{2, 101}) {
		t.Fatalf("same high bits: %v", got)
	}
	if got := d.candidates(c, nil); len(got) != 1 || got[0] != (dedupRef{2, 102}) {
		t.Fatalf("other high bits: %v", got)
	}
	far := uint64(100) + 1<<32 + 5
	h7, h8, h9 := uint64(7)<<32|1, uint64(8)<<32|1, uint64(9)<<32|1
	d.add(2, h7, far)
	d.add(2, h8, 99)
	d.add(2, h9, 100+1<<32-1) // the last offset that fits
	for h, want := range map[uint64]uint64{h7: far, h8: 99, h9: 100 + 1<<32 - 1} {
		if got := d.candidates(h, nil); len(got) != 1 || got[0] != (dedupRef{2, want}) {
			t.Fatalf("hash %d: %v, want index %d", h, got, want)
		}
	}
	if bi := d.buckets[2]; len(bi.far) != 2 || len(bi.tail) != 4 {
		t.Fatalf("%d far and %d near pairs", len(bi.far), len(bi.tail))
	}
}

// With values on, the cache keeps a copy of each key's value (not the
// caller's buffer), drops the copy of a value past maxCachedValue or past
// the budget (the slot then knows the version only), and frees the
// budget of a key it evicts.
func TestVersionCacheKeepsValues(t *testing.T) {
	c := versionCache{max: 2, values: true}
	v := []byte("one")
	c.put([]byte("a"), 1, v, true, nil)
	v[0] = 'X'
	if ver, val, has, ok := c.get([]byte("a")); !ok || !has || ver != 1 || string(val) != "one" {
		t.Fatalf("a: %d %q %v %v", ver, val, has, ok)
	}
	c.put([]byte("a"), 2, make([]byte, maxCachedValue+1), true, nil)
	if ver, _, has, ok := c.get([]byte("a")); !ok || has || ver != 2 || c.valBytes != 0 {
		t.Fatalf("a large value: version %d, value kept %v, known %v, %d bytes", ver, has, ok, c.valBytes)
	}
	big := make([]byte, maxCachedValue)
	for i := 0; c.valBytes+maxCachedValue <= valueBudget; i++ {
		c.max++
		c.put(fmt.Appendf(nil, "k%d", i), 3, big, true, nil)
	}
	c.put([]byte("over"), 4, big, true, nil)
	if _, _, has, ok := c.get([]byte("over")); !ok || has || c.valBytes > valueBudget {
		t.Fatalf("past the budget: value kept %v, known %v, %d bytes", has, ok, c.valBytes)
	}
	c.put([]byte("b"), 5, nil, true, nil) // absent, known
	if ver, val, has, ok := c.get([]byte("b")); !ok || !has || ver != 5 || len(val) != 0 {
		t.Fatalf("b: %d %q %v %v", ver, val, has, ok)
	}
	c.values = false
	c.put([]byte("b"), 6, []byte("x"), true, nil)
	if _, _, has, _ := c.get([]byte("b")); has {
		t.Fatal("a value kept with values off")
	}
}
