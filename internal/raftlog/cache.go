package raftlog

import "go.etcd.io/raft/v3/raftpb"

// Bounds of a Log's entry cache: the most recent entries are kept in memory
// so that a leader building appends for its followers, and raft checking
// terms, do not read back from Pebble what it has just written.
const (
	cacheMaxEntries = 1024
	cacheMaxBytes   = 4 << 20
)

// entryCache is a contiguous run of the newest log entries, the last of
// which is the log's last entry (or it is empty). Slices handed out are
// never written again: dropping entries copies the kept ones to a new
// array, so a reader may keep what it got.
type entryCache struct {
	ents  []raftpb.Entry
	bytes int
}

// first returns the index of the first cached entry (0 when empty).
func (c *entryCache) first() uint64 {
	if len(c.ents) == 0 {
		return 0
	}
	return c.ents[0].Index
}

// get returns entries [lo, hi) when the cache holds all of them, with
// capacity capped at their length so appending to the result cannot reach
// into the cache.
func (c *entryCache) get(lo, hi uint64) ([]raftpb.Entry, bool) {
	f := c.first()
	if f == 0 || lo < f || hi > f+uint64(len(c.ents)) || lo >= hi {
		return nil, false
	}
	return c.ents[lo-f : hi-f : hi-f], true
}

// term returns the term of entry i when cached.
func (c *entryCache) term(i uint64) (uint64, bool) {
	f := c.first()
	if f == 0 || i < f || i >= f+uint64(len(c.ents)) {
		return 0, false
	}
	return c.ents[i-f].Term, true
}

// append records ents, which have just become durable and replace any
// cached entries at or above their first index.
func (c *entryCache) append(ents []raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	if f := c.first(); f != 0 {
		switch lo := ents[0].Index; {
		case lo < f:
			c.reset()
		case lo < f+uint64(len(c.ents)):
			// A new leader overwrote a suffix: keep the prefix in a new
			// array (the old one may have been handed out).
			c.ents = append([]raftpb.Entry(nil), c.ents[:lo-f]...)
			c.bytes = sizeOf(c.ents)
		case lo > f+uint64(len(c.ents)):
			c.reset() // a gap (after a snapshot): start over
		}
	}
	c.bytes += sizeOf(ents)
	c.ents = append(c.ents, ents...)
	if len(c.ents) > cacheMaxEntries || c.bytes > cacheMaxBytes {
		c.shrink()
	}
}

// shrink drops the older half of the entries, and more while the rest is
// over half the byte bound.
func (c *entryCache) shrink() {
	keep := c.ents[len(c.ents)/2:]
	size := sizeOf(keep)
	for len(keep) > 1 && size > cacheMaxBytes/2 {
		size -= keep[0].Size()
		keep = keep[1:]
	}
	c.ents = append(make([]raftpb.Entry, 0, 2*len(keep)), keep...)
	c.bytes = size
}

func sizeOf(ents []raftpb.Entry) int {
	n := 0
	for i := range ents {
		n += ents[i].Size()
	}
	return n
}

// truncate drops entries at or below index.
func (c *entryCache) truncate(index uint64) {
	f := c.first()
	if f == 0 || index < f {
		return
	}
	if index >= f+uint64(len(c.ents))-1 {
		c.reset()
		return
	}
	c.ents = append([]raftpb.Entry(nil), c.ents[index+1-f:]...)
	c.bytes = sizeOf(c.ents)
}

func (c *entryCache) reset() { c.ents, c.bytes = nil, 0 }
