package statemachine

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// The cache keeps a key's index terms as a write passes them, a copy,
// until the key is written again; it knows that an absent key has none,
// and keeps its copies within budget.
func TestVersionCacheTerms(t *testing.T) {
	c := versionCache{max: 2}
	if _, ok := c.termsOf([]byte("a")); ok {
		t.Fatal("an empty, incomplete cache knows terms")
	}
	term := []byte("x")
	c.put([]byte("a"), 1, nil, false, []wire.IndexTerm{{Name: "e_bin", Term: term}})
	term[0] = 'y' // the cache holds a copy
	if ts, ok := c.termsOf([]byte("a")); !ok || len(ts) != 1 || string(ts[0].Term) != "x" {
		t.Fatalf("terms of a: %v %v", ts, ok)
	}
	c.update([]byte("a"), 2, nil, false, nil) // a new version without terms
	if ts, ok := c.termsOf([]byte("a")); !ok || ts != nil || c.termBytes != 0 {
		t.Fatalf("terms after an overwrite without terms: %v %v (%d bytes held)", ts, ok, c.termBytes)
	}
	c.put([]byte("gone"), 0, nil, false, nil)
	if ts, ok := c.termsOf([]byte("gone")); !ok || ts != nil {
		t.Fatal("an absent key's terms are not known to be none")
	}
	z := []wire.IndexTerm{{Name: "e_bin", Term: []byte("z")}}
	c.put([]byte("a"), 3, nil, false, z)
	c.put([]byte("b"), 4, nil, false, nil) // evicts a
	if _, ok := c.termsOf([]byte("a")); ok || c.termBytes != 0 {
		t.Fatalf("an evicted key's terms known, or %d bytes held after the eviction", c.termBytes)
	}
	c.put([]byte("b"), 5, nil, false, []wire.IndexTerm{{Name: "e_bin", Term: make([]byte, termBudget)}})
	if _, ok := c.termsOf([]byte("b")); ok {
		t.Fatal("terms over the budget kept")
	}
	c.put([]byte("gone"), 6, nil, false, z)
	c.reset()
	if c.termBytes != 0 {
		t.Fatalf("%d bytes held after reset", c.termBytes)
	}
}

// A replica whose cache knows the replaced terms maintains exactly the
// index entries of one that reads them from Pebble, with caches large and
// small (keys dropped and read again).
func TestIndexTermsFromTheCache(t *testing.T) {
	cmds := randomIndexed(rand.New(rand.NewSource(5)), 3000)
	read := testMachine(t)
	applyAll(read, cmds, func() int { return 4 })
	want := derived(t, read.cfg.Engine)
	if len(want) < 30 {
		t.Fatalf("only %d derived entries: the test writes too little", len(want))
	}
	for _, size := range []int{100, 7} {
		m := withVersionCache(testMachine(t), size)
		rng := rand.New(rand.NewSource(6))
		applyAll(m, cmds, func() int { return 1 + rng.Intn(8) })
		if got := derived(t, m.cfg.Engine); !slices.Equal(got, want) {
			t.Fatalf("cache of %d keys: derived entries\n got %q\nwant %q", size, got, want)
		}
		if size == 100 && m.versions.termBytes == 0 {
			t.Fatal("the cache holds no terms: the test checks nothing")
		}
	}
}

// Events recorded by reference on an indexed shard keep the new object's
// terms and give the replaced one's from the event referred to: they read
// back as on a replica that stored every replaced value and its terms.
func TestHistoryPrevByReferenceWithTerms(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	var cmds []wire.Command
	for i := range 80 {
		key := fmt.Sprint("k", i%6)
		if i%11 == 10 {
			cmds = append(cmds, hdel(key, i))
			continue
		}
		c := hput(key, fmt.Sprint(i))
		for j := rng.Intn(3); j > 0; j-- {
			c.Index = append(c.Index, bin("e_bin", fmt.Sprint("t", rng.Intn(4))))
		}
		cmds = append(cmds, c)
	}
	read, ref := historyMachine(t, 1000), refMachine(t, 1000)
	applyAll(read, cmds, func() int { return 3 })
	applyAll(ref, cmds, func() int { return 3 })
	if storedKinds(ref, eventPutRefTerms, eventDeleteRefTerms) == 0 {
		t.Fatal("no event with terms was recorded by reference")
	}
	withTerms := func(evs []Event) []string {
		out := describe(evs)
		for i, e := range evs {
			out[i] += fmt.Sprintf(" terms %s prev %s", termText(e.Terms), termText(e.PrevTerms))
		}
		return out
	}
	sameEvents(t, read, ref, 80, []uint64{1, 9, 40, 79}, []int{0, 1, 60}, withTerms)
	if got, want := derived(t, ref.cfg.Engine), derived(t, read.cfg.Engine); !slices.Equal(got, want) {
		t.Fatalf("derived entries differ: %q, want %q", got, want)
	}
}

func termText(ts []wire.IndexTerm) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Name+"="+string(t.Term))
	}
	return fmt.Sprint(s)
}
