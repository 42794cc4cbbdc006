package statemachine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
)

// DefaultHistoryBytes is Config.HistoryBytes's default.
const DefaultHistoryBytes = 64 << 20

// The history's byte bound. Retention in log indexes alone does not bound
// the history's size: an entry may carry one write of a value of many
// MiB, or hundreds of small writes batched, so 20,000 indexes could hold
// tens of GiB of events per shard. The machine therefore also counts the
// bytes it records, in windows of consecutive log indexes, and trims the
// oldest windows while the windows together hold more than HistoryBytes.
//
// The count is replicated state, like the floor: every replica counts the
// same bytes for the same events — the key and the new value of each
// (whether an event carries its replaced value or refers to it depends on
// the replica's cache, so the replaced value is not counted) plus a fixed
// overhead — closes its windows at the same indexes, and trims at the
// same applied index. The windows are written in every round that
// records events, under storage.HistoryBytesKey, so a restart and a
// snapshot go on with the same count.
//
// A window closes once it spans retention/16 indexes (the index trim's
// step) or holds HistoryBytes/16 bytes; all the events of one index are
// in one window, so a window holding one huge entry may be larger. The
// newest window is never trimmed by bytes.

// eventOverhead is what an event is counted beyond its key and value:
// its history key, encoding and versions, about.
const eventOverhead = 48

// histWindow counts the bytes of the events of log indexes [start, end].
type histWindow struct{ start, end, bytes uint64 }

// windowsBytes is the bytes the windows count together.
func windowsBytes(ws []histWindow) uint64 {
	var n uint64
	for _, w := range ws {
		n += w.bytes
	}
	return n
}

// countEvent adds an event of the write at index, of key and value, to
// the windows.
func (m *Machine) countEvent(index uint64, key, value []byte) {
	h := &m.hist
	n := uint64(len(key)+len(value)) + eventOverhead
	h.dirty = true
	if k := len(h.windows); k > 0 {
		w := &h.windows[k-1]
		if index == w.end || index-w.start < h.step() && w.bytes < h.maxBytes/16 {
			w.end, w.bytes = index, w.bytes+n
			return
		}
	}
	h.windows = append(h.windows, histWindow{start: index, end: index, bytes: n})
}

// step is the index trim's step: retention/16, at least 1.
func (h *historyState) step() uint64 { return max(h.retention/16, 1) }

// bytesFloor is the floor that trimming the oldest windows while they
// hold more than maxBytes gives (0: none); the newest stays.
func (h *historyState) bytesFloor() uint64 {
	if h.maxBytes == 0 {
		return 0
	}
	total := windowsBytes(h.windows)
	var floor uint64
	for i := 0; i < len(h.windows)-1 && total > h.maxBytes; i++ {
		total -= h.windows[i].bytes
		floor = h.windows[i].end
	}
	return floor
}

// dropWindowsThrough forgets the windows that end at or below floor.
func (h *historyState) dropWindowsThrough(floor uint64) {
	n := 0
	for n < len(h.windows) && h.windows[n].end <= floor {
		n++
	}
	if n > 0 {
		h.windows = append(h.windows[:0], h.windows[n:]...)
		h.dirty = true
	}
}

// writeWindows puts the windows into the round's batch if they changed.
func (m *Machine) writeWindows(rd *Round) {
	if !m.hist.dirty {
		return
	}
	m.hist.dirty = false
	rd.b.Set(storage.HistoryBytesKey(m.id), encodeWindows(m.hist.windows))
}

func encodeWindows(ws []histWindow) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 1+len(ws)*12), uint64(len(ws)))
	for _, w := range ws {
		b = binary.AppendUvarint(b, w.start)
		b = binary.AppendUvarint(b, w.end-w.start)
		b = binary.AppendUvarint(b, w.bytes)
	}
	return b
}

var errWindows = errors.New("history byte windows do not decode")

func decodeWindows(b []byte) ([]histWindow, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errWindows
	}
	b = b[k:]
	ws := make([]histWindow, 0, n)
	for range n {
		var v [3]uint64
		for i := range v {
			x, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, errWindows
			}
			v[i], b = x, b[k:]
		}
		ws = append(ws, histWindow{start: v[0], end: v[0] + v[1], bytes: v[2]})
	}
	if len(b) != 0 {
		return nil, errWindows
	}
	return ws, nil
}

// loadWindows reads the windows a restart or a snapshot left; none (a
// data dir or a snapshot from before the count) counts from now on.
func (m *Machine) loadWindows() error {
	m.hist.windows, m.hist.dirty = nil, false
	v, err := m.cfg.Engine.Get(storage.HistoryBytesKey(m.id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("statemachine: shard %d: %w", m.id, err)
	}
	ws, err := decodeWindows(v)
	if err != nil {
		return fmt.Errorf("statemachine: shard %d: %w: %v", m.id, storage.ErrCorrupt, err)
	}
	m.hist.windows = ws
	m.hist.dropWindowsThrough(m.hist.floor)
	m.hist.dirty = false
	return nil
}
