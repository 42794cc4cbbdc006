package statemachine

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Errors returned by a Machine.
var (
	// ErrNotFound: the key is absent (never written, or deleted).
	ErrNotFound = errors.New("statemachine: key not found")
	// ErrWrongShard: the key's token is outside the shard's range.
	ErrWrongShard = errors.New("statemachine: key outside the shard")
)

// DefaultDedupTTL is Config.DedupTTL's default.
const DefaultDedupTTL = 2 * time.Minute

// Config of a Machine.
type Config struct {
	// ShardID is the shard whose state the machine holds.
	ShardID uint64
	// Start and End bound the shard's token range (End exclusive, 0 =
	// 2^64), as in shard.Descriptor.
	Start, End uint64
	// Engine holds the shard's data and dedup table.
	Engine *storage.Engine
	// DedupTTL: how long a request id is remembered. It must be the same
	// on every replica of a shard. Default DefaultDedupTTL.
	DedupTTL time.Duration
	// VersionCache: keys whose current version the machine keeps in
	// memory, so writes to them skip a read. Default 65536 (about 7 MiB
	// at most for keys of 8 bytes); negative: none.
	VersionCache int
	// HistoryRetention: how many of the shard's latest log indexes keep
	// their change events (history.go), which watches read. Default
	// DefaultHistoryRetention; negative: no history (and no read of a
	// key's current value before an unconditional put).
	HistoryRetention int
	// HistoryBytes bounds the history in bytes besides log indexes
	// (history_bytes.go): its events' keys and values, counted the same
	// on every replica. Default DefaultHistoryBytes; negative: no bound
	// but retention.
	HistoryBytes int64
	// Logger for entries that do not decode. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	if c.DedupTTL == 0 {
		c.DedupTTL = DefaultDedupTTL
	}
	if c.VersionCache == 0 {
		c.VersionCache = 65536
	}
	if c.HistoryRetention == 0 {
		c.HistoryRetention = DefaultHistoryRetention
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = DefaultHistoryBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first field of a filled Config out of range.
func (c Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("statemachine: Config.Engine is required")
	case c.ShardID == 0:
		return errors.New("statemachine: Config.ShardID is required")
	case c.End != 0 && c.End <= c.Start:
		return fmt.Errorf("statemachine: token range [%#x, %#x) is empty", c.Start, c.End)
	case c.DedupTTL < 0:
		return fmt.Errorf("statemachine: DedupTTL %s: want a positive duration", c.DedupTTL)
	}
	return nil
}

// Machine is the state machine of one shard replica.
type Machine struct {
	cfg   Config
	id    uint64
	dedup dedupIndex
	// dedupFloor: dedup buckets below it are deleted (pruneDedup).
	dedupFloor uint64
	versions   versionCache
	clock      clockState
	hist       historyState
	// evSpare: the last round's event buffers, for the next (Begin).
	evSpare struct {
		buf []byte
		evs []eventRef
	}
	// rng is the token range the shard owns now: Config's until a split
	// halves it (SetRange). Get reads it from any goroutine.
	rng atomic.Pointer[tokenRange]
}

// tokenRange is [start, end), end 0 meaning 2^64.
type tokenRange struct{ start, end uint64 }

func (t *tokenRange) contains(tok uint64) bool {
	return tok >= t.start && (t.end == 0 || tok < t.end)
}

// SetRange sets the token range the shard owns (a split applied at the
// current position of the log, or a snapshot that carried a narrower
// descriptor). From then on, writes outside it apply nothing and answer
// wire.StatusWrongShard, and Get refuses keys outside it. The version
// cache is cleared: keys that left the shard are another machine's now.
func (m *Machine) SetRange(start, end uint64) {
	m.rng.Store(&tokenRange{start, end})
	m.versions.reset()
}

// Range returns the token range the shard owns.
func (m *Machine) Range() (start, end uint64) {
	r := m.rng.Load()
	return r.start, r.end
}

// Open returns the machine of cfg.ShardID over cfg.Engine, dropping dedup
// records of earlier layouts and loading the dedup index.
func Open(cfg Config) (*Machine, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Machine{cfg: cfg, id: cfg.ShardID}
	m.rng.Store(&tokenRange{cfg.Start, cfg.End})
	m.versions.max = cfg.VersionCache
	m.hist.retention = uint64(max(cfg.HistoryRetention, 0))
	m.hist.maxBytes = uint64(max(cfg.HistoryBytes, 0))
	m.versions.values = m.hist.retention > 0
	if err := dropLegacyDedup(cfg.Engine, m.id); err != nil {
		return nil, fmt.Errorf("statemachine: shard %d: %w", m.id, err)
	}
	if err := m.load(true); err != nil {
		return nil, err
	}
	if err := m.checkEmpty(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkEmpty marks the (empty) version cache complete when the shard has
// no data: then every key it will hold goes through the cache, and as
// long as the cache drops none, a key it does not hold is known absent
// without a read.
func (m *Machine) checkEmpty() error {
	r := m.rng.Load()
	it, err := m.cfg.Engine.NewIter(storage.DataSpan(r.start, r.end))
	if err != nil {
		return fmt.Errorf("statemachine: shard %d: %w", m.id, err)
	}
	defer it.Close()
	if !it.First() {
		m.versions.markComplete()
	}
	return nil
}

// load reads the shard clock and the dedup index from the engine. With
// dropUnclocked, dedup groups without a shard clock (bucketed by the
// proposers' wall clocks, as an earlier Cairn wrote them) are dropped.
func (m *Machine) load(dropUnclocked bool) error {
	c, found, err := loadClock(m.cfg.Engine, m.id)
	if err != nil {
		return fmt.Errorf("statemachine: shard %d: %w", m.id, err)
	}
	m.clock = c
	if !found && dropUnclocked {
		p := storage.DedupPrefix(m.id)
		b := m.cfg.Engine.NewBatch()
		b.DeleteRange(p, storage.PrefixEnd(p))
		if err := b.Commit(true); err != nil {
			return fmt.Errorf("statemachine: shard %d: %w", m.id, err)
		}
	}
	if err := m.dedup.load(m.cfg.Engine, m.id); err != nil {
		return fmt.Errorf("statemachine: shard %d: dedup table: %w", m.id, err)
	}
	return nil
}

// Reset reloads the machine's in-memory state (shard clock, dedup index,
// version cache) from the engine, after a snapshot replaced the shard's
// state there.
func (m *Machine) Reset() error {
	m.dedupFloor = 0
	m.versions.reset()
	if err := m.load(false); err != nil {
		return err
	}
	return m.checkEmpty()
}

// Clock is the shard clock: the time that passed on the shard's leaders
// while they stamped entries (see clock.go).
func (m *Machine) Clock() time.Duration { return time.Duration(m.clock.now) }

// HasRecords reports whether the dedup table holds records that wait to
// expire (a leader then stamps the clock at least every StampInterval).
func (m *Machine) HasRecords() bool { return len(m.dedup.order) > 0 }

// dropLegacyDedup deletes dedup records of earlier layouts, if any (a
// data dir written by an older Cairn; they only served retries within two
// minutes of their write).
func dropLegacyDedup(eng *storage.Engine, shardID uint64) error {
	for _, p := range storage.LegacyDedupPrefixes(shardID) {
		it, err := eng.NewIter(p, storage.PrefixEnd(p))
		if err != nil {
			return err
		}
		found := it.First()
		if err := it.Close(); err != nil {
			return err
		}
		if found {
			b := eng.NewBatch()
			b.DeleteRange(p, storage.PrefixEnd(p))
			if err := b.Commit(true); err != nil {
				return err
			}
		}
	}
	return nil
}

// Value is a stored value, its version and its index terms.
type Value struct {
	Data    []byte
	Version uint64
	Index   []wire.IndexTerm
}

// Get reads key from the applied state (a serializable read: it may be
// stale on a follower). It reads the engine only, so it is safe to call
// concurrently with Apply.
func (m *Machine) Get(key []byte) (Value, error) {
	t := shard.Token(key)
	if !m.rng.Load().contains(t) {
		return Value{}, fmt.Errorf("%w: shard %d", ErrWrongShard, m.id)
	}
	b, err := m.cfg.Engine.Get(storage.DataKey(t, key))
	if errors.Is(err, storage.ErrNotFound) {
		return Value{}, ErrNotFound
	}
	if err != nil {
		return Value{}, err
	}
	v, terms, data, err := storage.DecodeValueMeta(b)
	if err != nil {
		return Value{}, err
	}
	return Value{Data: data, Version: v, Index: terms}, nil
}

// Result of an applied write.
type Result struct {
	wire.Result
	// Index is the log index at which the command was applied.
	Index uint64
}

// Applied is the result of one command of a round.
type Applied struct {
	RequestID []byte
	// Fingerprint is the command's (wire.Command.Fingerprint): the
	// proposals to answer with Result are those of this request id and
	// fingerprint.
	Fingerprint uint64
	Result      Result
}

// Round is one apply round: the commands of consecutive committed
// entries, written in one unsynced batch by Commit.
type Round struct {
	b       *applyBatch
	waiting func(reqID []byte) bool
	applied []Applied
	// last is the highest index applied in the round; evIndex and evPos
	// place the next history event (history.go).
	last, evIndex uint64
	evPos         uint32
}

// Begin starts a round. waiting tells whether this replica answers the
// write of a request id (it holds its proposal); nil: none.
func (m *Machine) Begin(waiting func(reqID []byte) bool) *Round {
	if waiting == nil {
		waiting = func([]byte) bool { return false }
	}
	b := newApplyBatch(m.cfg.Engine)
	b.evBuf, b.evs = m.evSpare.buf, m.evSpare.evs
	m.evSpare.buf, m.evSpare.evs = nil, nil
	return &Round{b: b, waiting: waiting}
}

// Applied lists the results of the round's commands so far, in order.
// The request ids alias the entries' data.
func (rd *Round) Applied() []Applied { return rd.applied }

// Set adds a write of the caller's (the applied state) to the round.
func (rd *Round) Set(k, v []byte) { rd.b.Set(k, v) }

// ApplyEntry applies the data of the normal entry at index and term (one
// command, a batch, or a stamped entry). A stamp moves the shard clock and
// drops the dedup buckets that expired. Data that does not decode is
// skipped and logged: proposers only propose valid encodings, and skipping
// is the same on every replica.
func (m *Machine) ApplyEntry(rd *Round, index, term uint64, data []byte) {
	rd.last = max(rd.last, index)
	if len(data) == 0 {
		return // a new leader's empty entry
	}
	e, err := wire.DecodeEntry(data)
	if err != nil {
		m.cfg.Logger.Error("skipping undecodable entry", "shard", m.id, "index", index, "err", err)
		return
	}
	if e.Stamped {
		m.clock.advance(term, e.Clock, uint64(MaxClockStep(m.cfg.DedupTTL)))
		m.pruneDedup(rd.b)
	}
	for _, c := range e.Commands {
		var cmd wire.Command
		if err := cmd.Unmarshal(c); err != nil {
			m.cfg.Logger.Error("skipping undecodable command", "shard", m.id, "index", index, "err", err)
			continue
		}
		res, fp := m.apply(rd, index, &cmd)
		rd.applied = append(rd.applied, Applied{RequestID: cmd.RequestID, Fingerprint: fp, Result: res})
	}
}

// Commit writes the round, with the shard clock, without fsync.
func (m *Machine) Commit(rd *Round) error {
	m.trimHistory(rd)
	rd.b.Set(clockKey(m.id), m.clock.marshal())
	err := rd.b.commit()
	// The next round encodes its events into this one's buffers (the
	// engine's batch copied them), unless they grew past maxSpareEvents.
	if cap(rd.b.evBuf) <= maxSpareEvents {
		m.evSpare.buf, m.evSpare.evs = rd.b.evBuf[:0], rd.b.evs[:0]
	}
	return err
}

// maxSpareEvents bounds the event buffer a machine keeps between rounds.
const maxSpareEvents = 4 << 20
