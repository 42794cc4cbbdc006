package statemachine

import (
	"bytes"
	"strings"

	"github.com/cairn-db/cairn/internal/wire"
)

// versionCache remembers the current version of recently written keys of
// a replica (0: absent), so applying a write to a hot key needs no Pebble
// read to learn whether it exists and at which version. Apply keeps it
// exact: every write of a data key goes through it, and a snapshot clears
// it. At most max keys; a full cache drops the key it took in longest ago
// (a ring of the keys in the order they came in: no map iteration).
//
// With values on (a replica that keeps a change history, whose events
// carry the value a write replaces), a key's slot also keeps a copy of its
// current value when the value is at most maxCachedValue bytes and the
// cache's values stay within valueBudget bytes: a write to a hot key then
// finds the value it replaces here instead of reading Pebble.
//
// A slot also keeps the secondary-index terms of the key's current
// object (a copy, within termBudget bytes): on a shard that holds indexed
// objects every write must remove the entries of the terms it replaces
// (index.go), and the cache spares it reading them. Apply passes them with
// every write of the key (put, update).
type versionCache struct {
	m     map[string]int // key → its slot
	max   int
	slots []versionSlot // in the order the keys came in; the next goes to slots[pos]
	pos   int
	// values: keep values too; valBytes: the capacity their copies hold.
	values   bool
	valBytes int
	// termBytes: the bytes the slots' copies of index terms hold.
	termBytes int
	// complete: the cache holds every key of the shard that exists (it
	// was opened over a shard without data and has dropped no key since),
	// so a key it does not hold is absent.
	complete bool
}

// versionSlot is one cached key.
type versionSlot struct {
	key     string
	version uint64
	val     []byte // a copy of the current value, when hasVal
	hasVal  bool
	// terms: a copy of the current object's index terms, when hasTerms.
	terms    []wire.IndexTerm
	hasTerms bool
}

const (
	// maxCachedValue: larger values are not kept (their slot knows the
	// version only).
	maxCachedValue = 1 << 10
	// valueBudget bounds the bytes of the values one cache keeps.
	valueBudget = 1 << 20
	// termBudget bounds the bytes of the index terms one cache keeps.
	termBudget = 4 << 20
)

// get returns key's version and whether the cache knows it; val is its
// current value when hasVal (it aliases the cache: use it before the next
// put or update).
func (c *versionCache) get(key []byte) (version uint64, val []byte, hasVal, known bool) {
	i, known := c.m[string(key)]
	if !known {
		if c.complete {
			return 0, nil, true, true
		}
		return 0, nil, false, false
	}
	s := &c.slots[i]
	return s.version, s.val, s.hasVal, true
}

// put sets key's version (and, with hasVal, its value: nil for an absent
// key) and its object's index terms, taking the key in if the cache does
// not hold it.
func (c *versionCache) put(key []byte, version uint64, val []byte, hasVal bool, terms []wire.IndexTerm) {
	if c.max <= 0 {
		return
	}
	if c.m == nil {
		// Grown as keys come: a small shard's cache stays small.
		c.m = make(map[string]int, min(c.max, 1024))
		c.slots = make([]versionSlot, 0, min(c.max, 1024))
	}
	if i, ok := c.m[string(key)]; ok {
		c.set(&c.slots[i], version, val, hasVal, terms)
		return
	}
	k := string(key)
	var i int
	if len(c.slots) < c.max {
		c.slots = append(c.slots, versionSlot{})
		i = len(c.slots) - 1
	} else {
		i = c.pos
		delete(c.m, c.slots[i].key)
		c.dropTerms(&c.slots[i])
		c.complete = false
		c.pos = (c.pos + 1) % c.max
	}
	c.slots[i].key = k
	c.m[k] = i
	c.set(&c.slots[i], version, val, hasVal, terms)
}

// set fills slot s, reusing its value's buffer, and keeps a copy of terms
// when they fit termBudget.
func (c *versionCache) set(s *versionSlot, version uint64, val []byte, hasVal bool, terms []wire.IndexTerm) {
	c.setTerms(s, terms)
	s.version = version
	s.hasVal = false
	if !c.values || !hasVal || len(val) > maxCachedValue {
		c.valBytes -= cap(s.val)
		s.val = nil
		return
	}
	if cap(s.val) < len(val) {
		if c.valBytes-cap(s.val)+len(val) > valueBudget {
			c.valBytes -= cap(s.val)
			s.val = nil
			return
		}
		c.valBytes += len(val) - cap(s.val)
		s.val = make([]byte, 0, len(val))
	}
	s.val = append(s.val[:0], val...)
	s.hasVal = true
}

// update sets key's version, value and terms as put does, if the cache
// holds key (or, while complete, must hold it).
func (c *versionCache) update(key []byte, version uint64, val []byte, hasVal bool, terms []wire.IndexTerm) {
	if i, ok := c.m[string(key)]; ok {
		c.set(&c.slots[i], version, val, hasVal, terms)
	} else if c.complete && version != 0 {
		c.put(key, version, val, hasVal, terms)
	}
}

// termsOf returns the index terms of key's current object when the cache
// knows them (a key it knows to be absent has none).
func (c *versionCache) termsOf(key []byte) ([]wire.IndexTerm, bool) {
	i, ok := c.m[string(key)]
	if !ok {
		return nil, c.complete
	}
	s := &c.slots[i]
	if s.version == 0 {
		return nil, true
	}
	return s.terms, s.hasTerms
}

// setTerms keeps a copy of terms in slot s, if they fit termBudget.
func (c *versionCache) setTerms(s *versionSlot, terms []wire.IndexTerm) {
	c.dropTerms(s)
	n := termsBytes(terms)
	if c.termBytes+n > termBudget {
		return
	}
	if len(terms) > 0 {
		s.terms = make([]wire.IndexTerm, len(terms))
		for j, t := range terms {
			s.terms[j] = wire.IndexTerm{Name: strings.Clone(t.Name), Term: bytes.Clone(t.Term)}
		}
	}
	c.termBytes += n
	s.hasTerms = true
}

// dropTerms forgets slot s's index terms.
func (c *versionCache) dropTerms(s *versionSlot) {
	if s.hasTerms {
		c.termBytes -= termsBytes(s.terms)
	}
	s.terms, s.hasTerms = nil, false
}

// termsBytes is what a copy of terms costs the budget.
func termsBytes(terms []wire.IndexTerm) int {
	n := 0
	for _, t := range terms {
		n += len(t.Name) + len(t.Term) + 40 // the strings, slice and struct
	}
	return n
}

// reset empties the cache; it is not complete until markComplete.
func (c *versionCache) reset() {
	clear(c.m)
	for i := range c.slots {
		c.slots[i].terms = nil
	}
	c.slots, c.pos, c.valBytes, c.termBytes = c.slots[:0], 0, 0, 0
	c.complete = false
}

// markComplete declares the (empty) cache complete: the shard has no
// data.
func (c *versionCache) markComplete() {
	if c.max > 0 && len(c.slots) == 0 {
		c.complete = true
	}
}
