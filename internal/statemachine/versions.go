package statemachine

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

// update sets key's version if the cache holds key.
func (c *versionCache) update(key []byte, version uint64) {
	if _, ok := c.m[string(key)]; ok {
		c.m[string(key)] = version
	}
}

func (c *versionCache) reset() {
	clear(c.m)
	c.ring, c.pos = c.ring[:0], 0
}
