package statemachine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/storage"
)

// The shard clock ages dedup records. It is replicated state, moved only
// by the log: a leader stamps the entries it proposes with a reading of
// its own monotonic clock (wire.MarshalStamped), and applying a stamped
// entry of term T advances the shard clock by how far that reading is
// past the highest earlier reading of T — the time that passed on the
// leader of T between its two stamps — but by at most MaxClockStep. The
// first stamped entry of a term only records its reading. Unstamped
// entries (proposals a follower forwarded) leave the clock alone.
//
// So no node's wall clock matters, and the shard clock runs no faster than
// real time: a term has one leader, whose monotonic clock measures real
// time, and the stamps of a term that commit were all made before the next
// term's leader was elected, so the intervals counted never overlap. The
// clamp bounds what the first stamp after a record may count of the time
// before the record (a leader that stamped nothing for a while).
type clockState struct {
	now  uint64 // the shard clock, in nanoseconds
	term uint64 // the term of the last stamped entry
	last uint64 // the highest reading stamped in term
	// indexed is not about time but rides in the same record (replicated
	// state that snapshots carry): some write to the shard has carried
	// index terms (see index.go). Encoded as a 25th byte, only when set.
	indexed bool
}

// MaxClockStep is the most one stamped entry advances the shard clock of a
// shard whose DedupTTL is ttl: an eighth of it (15 s of the default).
func MaxClockStep(ttl time.Duration) time.Duration { return ttl / 8 }

// MinRetention is how long, in real time from the first attempt of a
// write, its dedup record is kept at least: DedupTTL less MaxClockStep
// (105 s of the default 2 minutes). A retry whose proposal reaches the
// leader within it is answered from the record. Client retry windows
// (internal/kv, client) stay well below it.
func MinRetention(ttl time.Duration) time.Duration { return ttl - MaxClockStep(ttl) }

// StampInterval is how often a leader proposes an entry that only stamps
// the clock when none of its own proposals did and the dedup table holds
// records: a sixteenth of DedupTTL, half MaxClockStep, so the clamp loses
// no time while records wait to expire.
func StampInterval(ttl time.Duration) time.Duration { return ttl / 16 }

// advance applies a stamp of reading in an entry of term, with steps of at
// most maxStep.
func (c *clockState) advance(term, reading, maxStep uint64) {
	if term != c.term {
		c.term, c.last = term, reading
		return
	}
	if reading > c.last {
		c.now += min(reading-c.last, maxStep)
		c.last = reading
	}
}

func (c *clockState) marshal() []byte {
	b := make([]byte, 0, 25)
	b = binary.BigEndian.AppendUint64(b, c.now)
	b = binary.BigEndian.AppendUint64(b, c.term)
	b = binary.BigEndian.AppendUint64(b, c.last)
	if c.indexed {
		b = append(b, 1)
	}
	return b
}

func (c *clockState) unmarshal(b []byte) error {
	if len(b) != 24 && (len(b) != 25 || b[24] != 1) {
		return fmt.Errorf("%w: shard clock of %d bytes", storage.ErrCorrupt, len(b))
	}
	c.indexed = len(b) == 25
	c.now = binary.BigEndian.Uint64(b)
	c.term = binary.BigEndian.Uint64(b[8:])
	c.last = binary.BigEndian.Uint64(b[16:])
	return nil
}

// clockKey holds a shard's clock: the dedup prefix itself, so it is part
// of the dedup span (snapshots carry it) and sorts before every group (a
// pruning range deletion never covers it).
func clockKey(shardID uint64) []byte { return storage.DedupPrefix(shardID) }

// loadClock reads the shard's clock; found is false if it has none.
func loadClock(eng *storage.Engine, shardID uint64) (c clockState, found bool, err error) {
	b, err := eng.Get(clockKey(shardID))
	if errors.Is(err, storage.ErrNotFound) {
		return clockState{}, false, nil
	}
	if err != nil {
		return clockState{}, false, err
	}
	return c, true, c.unmarshal(b)
}
