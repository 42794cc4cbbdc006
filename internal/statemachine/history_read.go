package statemachine

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
)

// HistoryPage is a run of the history read by Events.
type HistoryPage struct {
	// Events in log order (then position in the entry); they do not
	// alias the engine.
	Events []Event
	// Next is the index to read from next: every event below it and at
	// or above the read's from is in Events.
	Next uint64
	// Floor is the history's floor when read.
	Floor uint64
}

// Events reads the history from index from through index through (the
// caller's applied index, so the page holds nothing the caller has not
// reported applied; a round commits its events atomically). It stops after the entry at which the page passes maxBytes of keys and
// values, so an entry's events are never split across pages. A from at
// or below the floor answers a *CompactedError. It reads the engine only
// and is safe to call concurrently with Apply.
func (m *Machine) Events(from, through uint64, maxBytes int) (HistoryPage, error) {
	if m.hist.retention == 0 {
		return HistoryPage{}, &CompactedError{Floor: through}
	}
	if from == 0 {
		from = 1
	}
	page := HistoryPage{Next: from}
	it, err := m.cfg.Engine.NewIter(storage.HistoryFloorKey(m.id), storage.HistoryIndexStart(m.id, through+1))
	if err != nil {
		return HistoryPage{}, err
	}
	defer it.Close()
	// The floor record and the events come from one iterator: one
	// consistent view, even if a snapshot replaces the history meanwhile.
	if !it.First() || len(it.Key()) != 9 || len(it.Value()) != 8 {
		return HistoryPage{}, fmt.Errorf("statemachine: shard %d: history has no floor record", m.id)
	}
	page.Floor = binary.BigEndian.Uint64(it.Value())
	if from <= page.Floor {
		return HistoryPage{}, &CompactedError{Floor: page.Floor}
	}
	if from > through {
		return page, nil
	}
	bytes := 0
	last := uint64(0)
	for ok := it.SeekGE(storage.HistoryIndexStart(m.id, from)); ok; ok = it.Next() {
		index, _, err := storage.DecodeHistoryKey(it.Key())
		if err != nil {
			return HistoryPage{}, err
		}
		if index != last && bytes >= maxBytes && maxBytes > 0 {
			page.Next = index
			return page, nil
		}
		last = index
		e, err := decodeEvent(index, append([]byte(nil), it.Value()...))
		if err != nil {
			return HistoryPage{}, err
		}
		bytes += len(e.Key) + len(e.Value) + len(e.PrevValue)
		page.Events = append(page.Events, e)
	}
	page.Next = through + 1
	return page, nil
}
