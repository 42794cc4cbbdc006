package statemachine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// DefaultHistoryRetention is Config.HistoryRetention's default.
const DefaultHistoryRetention = 20000

// The change history. Every write that changes the shard's data (a put,
// or a delete of a key that exists) also writes, in the same apply batch,
// an event under storage.HistoryKey(shard, index, pos): the key, the new
// value (none for a delete), and the version and value the write
// replaced. The previous value is why a replica that keeps history reads
// a key's current value before every write. The events of the last
// HistoryRetention log indexes are kept: when the applied index passes a
// multiple of retention/16, the events at or below index - retention go
// and the floor record moves up. The rule depends on the log alone, so
// every replica keeps the same events; snapshots carry them (the history
// is a span of the shard's replicated state).

// Event is one change of the shard's data.
type Event struct {
	// Index is the log index of the write (its version, the key's new
	// mod revision; for a delete, the delete's own index).
	Index  uint64
	Delete bool
	Key    []byte
	// Value is the put's value (nil for a delete).
	Value []byte
	// PrevVersion is the version the write replaced (0: the key was
	// absent) and PrevValue its value.
	PrevVersion uint64
	PrevValue   []byte
	// Terms and PrevTerms are the secondary-index terms of the new
	// object (none for a delete) and of the one replaced (the etcd API
	// keeps a key's lease there).
	Terms, PrevTerms []wire.IndexTerm
	// PrevMissing: the replaced value is no longer known (PrevVersion is
	// right, PrevValue is nil). The event was recorded with its previous
	// value by reference — as the value of the key's event at
	// PrevVersion — and that event has been trimmed since. A reader that
	// needs the previous value must treat the event as compacted.
	PrevMissing bool
	// prevRef: recorded by reference (apply sets it; Events resolves it).
	prevRef bool
}

// ErrCompacted: a read of the history from an index at or below its floor
// (the events there are gone). Wrapped in a *CompactedError.
var ErrCompacted = errors.New("statemachine: history compacted")

// CompactedError tells the floor of the history that refused a read.
type CompactedError struct{ Floor uint64 }

func (e *CompactedError) Error() string {
	return fmt.Sprintf("%v: events up to index %d are gone", ErrCompacted, e.Floor)
}

func (e *CompactedError) Unwrap() error { return ErrCompacted }

const (
	eventPut    = 'p'
	eventDelete = 'd'
	// The kinds of an event with index terms (new or replaced): the
	// terms come first. A write without terms on either side is encoded
	// as before they existed.
	eventPutTerms    = 'P'
	eventDeleteTerms = 'D'
	// The kinds of an event whose replaced value is not in the event but
	// is the value of the key's own event at PrevVersion, still in the
	// history when it was written (apply.go; no terms on either side).
	eventPutRef    = 'q'
	eventDeleteRef = 'e'
	// The kinds by reference of a write on a shard with indexed objects:
	// the new object's terms come first; the replaced one's are those of
	// the event referred to (its Terms).
	eventPutRefTerms    = 'Q'
	eventDeleteRefTerms = 'E'
)

// encodeEvent encodes e without its index (which is in the key):
// kind(1) | [terms] | uvarint len(key) | key | uvarint len(value) | value |
// uvarint prevVersion | prevValue, where terms, for the kinds with terms,
// are uvarint len | wire.AppendIndexTerms of Terms, then the same of
// PrevTerms. The kinds by reference (prevRef) have no prevValue, and
// those with terms only Terms (their PrevTerms are the Terms of the event
// referred to).
func encodeEvent(e *Event) []byte {
	return appendEvent(make([]byte, 0, 1+3*binary.MaxVarintLen64+len(e.Key)+len(e.Value)+len(e.PrevValue)), e)
}

// appendEvent appends e's encoding (encodeEvent's) to b.
func appendEvent(b []byte, e *Event) []byte {
	kind := byte(eventPut)
	if e.Delete {
		kind = eventDelete
	}
	if e.prevRef && len(e.Terms) == 0 && len(e.PrevTerms) == 0 {
		kind = eventPutRef
		if e.Delete {
			kind = eventDeleteRef
		}
		b = append(b, kind)
	} else if e.prevRef {
		kind = eventPutRefTerms
		if e.Delete {
			kind = eventDeleteRefTerms
		}
		b = append(b, kind)
		enc := wire.AppendIndexTerms(nil, e.Terms)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	} else if len(e.Terms) > 0 || len(e.PrevTerms) > 0 {
		kind = eventPutTerms
		if e.Delete {
			kind = eventDeleteTerms
		}
		b = append(b, kind)
		for _, terms := range [][]wire.IndexTerm{e.Terms, e.PrevTerms} {
			enc := wire.AppendIndexTerms(nil, terms)
			b = binary.AppendUvarint(b, uint64(len(enc)))
			b = append(b, enc...)
		}
	} else {
		b = append(b, kind)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Key)))
	b = append(b, e.Key...)
	b = binary.AppendUvarint(b, uint64(len(e.Value)))
	b = append(b, e.Value...)
	b = binary.AppendUvarint(b, e.PrevVersion)
	if e.prevRef {
		return b
	}
	return append(b, e.PrevValue...)
}

// decodeEvent decodes an event of index; its slices alias b.
func decodeEvent(index uint64, b []byte) (Event, error) {
	bad := fmt.Errorf("%w: history event at %d", storage.ErrCorrupt, index)
	if len(b) < 1 {
		return Event{}, bad
	}
	kind := b[0]
	e := Event{Index: index, Delete: kind == eventDelete || kind == eventDeleteTerms || kind == eventDeleteRef || kind == eventDeleteRefTerms}
	b = b[1:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, false
		}
		f := b[w : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	var ok bool
	switch kind {
	case eventPut, eventDelete:
	case eventPutRef, eventDeleteRef:
		e.prevRef = true
	case eventPutRefTerms, eventDeleteRefTerms:
		e.prevRef = true
		enc, ok := field()
		if !ok {
			return Event{}, bad
		}
		var err error
		if e.Terms, err = wire.DecodeIndexTerms(enc); err != nil {
			return Event{}, bad
		}
	case eventPutTerms, eventDeleteTerms:
		for _, terms := range []*[]wire.IndexTerm{&e.Terms, &e.PrevTerms} {
			enc, ok := field()
			if !ok {
				return Event{}, bad
			}
			var err error
			if *terms, err = wire.DecodeIndexTerms(enc); err != nil {
				return Event{}, bad
			}
		}
	default:
		return Event{}, bad
	}
	if e.Key, ok = field(); !ok {
		return Event{}, bad
	}
	if e.Value, ok = field(); !ok {
		return Event{}, bad
	}
	if e.Delete {
		e.Value = nil
	}
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return Event{}, bad
	}
	e.PrevVersion = n
	if n > 0 && !e.prevRef {
		e.PrevValue = b[w:]
	}
	return e, nil
}

// historyState is the machine's view of its history.
type historyState struct {
	retention uint64 // 0: no history is kept
	floor     uint64
	// maxBytes bounds what windows count (0: no bound; history_bytes.go);
	// dirty: the windows changed since the last round wrote them.
	maxBytes uint64
	windows  []histWindow
	dirty    bool
}

// OpenHistory loads the history's floor. A shard without a floor record
// (a data dir from before the history, or a snapshot without one) starts
// its history after applied, the replica's applied index: the events at
// or below it were never recorded. A machine that keeps no history
// deletes what a snapshot or an earlier run left, so that keeping one
// again later starts afresh instead of showing a gap as history.
func (m *Machine) OpenHistory(applied uint64) error {
	if m.hist.retention == 0 {
		b := m.cfg.Engine.NewBatch()
		b.DeleteRange(storage.HistorySpan(m.id))
		return b.Commit(false)
	}
	v, err := m.cfg.Engine.Get(storage.HistoryFloorKey(m.id))
	switch {
	case err == nil && len(v) == 8:
		m.hist.floor = binary.BigEndian.Uint64(v)
		return m.loadWindows()
	case err == nil:
		return fmt.Errorf("statemachine: shard %d: %w: history floor %x", m.id, storage.ErrCorrupt, v)
	case !errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("statemachine: shard %d: %w", m.id, err)
	}
	m.hist.floor, m.hist.windows, m.hist.dirty = applied, nil, false
	b := m.cfg.Engine.NewBatch()
	b.Set(storage.HistoryFloorKey(m.id), binary.BigEndian.AppendUint64(nil, applied))
	b.Delete(storage.HistoryBytesKey(m.id))
	return b.Commit(false)
}

// refersBack reports whether the event of a write at index may give the
// value it replaces by reference, as the value of the key's event at prev
// (the version the write replaces, which the version cache knows): the
// history holds that event now, and will for as long as the new event
// is in the first half of its retention. Later a reader may find it
// trimmed (Event.PrevMissing): a reader more than half the retention
// behind the shard's applied index can then not get the previous value.
// Taking the value from the history spares the write a read of the key
// (most of the cost of applying it when the key is not in the cache with
// its value) and the event the copy of the value.
func (m *Machine) refersBack(index, prev uint64) bool {
	return prev > m.hist.floor && prev < index && index-prev <= m.hist.retention/2
}

// HistoryFloor is the highest log index whose events are gone: a read of
// the history must start above it.
func (m *Machine) HistoryFloor() uint64 { return m.hist.floor }

// recordEvent adds the event of a write at index to the round. The
// round's events go into its batch apart from its other writes (batch.go):
// they are never read back within the round, and their keys come in
// order.
func (m *Machine) recordEvent(rd *Round, index uint64, e *Event) {
	if index != rd.evIndex {
		rd.evIndex, rd.evPos = index, 0
	}
	rd.b.addEvent(m.id, index, rd.evPos, e)
	rd.evPos++
	m.countEvent(index, e.Key, e.Value)
}

// trimHistory drops the events at or below last - retention, a multiple
// of retention/16 at a time, and those of the oldest byte windows while
// the windows hold more than maxBytes (history_bytes.go); it moves the
// floor record and writes the windows.
func (m *Machine) trimHistory(rd *Round) {
	ret := m.hist.retention
	if ret == 0 {
		return
	}
	defer m.writeWindows(rd)
	var floor uint64
	if rd.last > ret {
		step := m.hist.step()
		floor = (rd.last - ret) / step * step
	}
	floor = max(floor, m.hist.bytesFloor())
	if floor <= m.hist.floor {
		return
	}
	rd.b.DeleteRange(storage.HistoryIndexStart(m.id, 0), storage.HistoryIndexStart(m.id, floor+1))
	rd.b.dropEventsThrough(floor)
	rd.b.Set(storage.HistoryFloorKey(m.id), binary.BigEndian.AppendUint64(nil, floor))
	m.hist.floor = floor
	m.hist.dropWindowsThrough(floor)
}
