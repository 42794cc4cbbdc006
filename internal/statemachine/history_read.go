package statemachine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
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
	// The page's latest put of each key, for the events that give their
	// replaced value by reference (resolve).
	var r resolver
	for ok := it.SeekGE(storage.HistoryIndexStart(m.id, from)); ok; ok = it.Next() {
		index, _, err := storage.DecodeHistoryKey(it.Key())
		if err != nil {
			return HistoryPage{}, err
		}
		if index != last && bytes >= maxBytes && maxBytes > 0 {
			page.Next = index
			r.resolveAll(m, &page)
			return page, nil
		}
		last = index
		e, err := decodeEvent(index, append([]byte(nil), it.Value()...))
		if err != nil {
			return HistoryPage{}, err
		}
		if e.prevRef {
			r.resolveInPage(&e)
		}
		r.saw(&e)
		bytes += len(e.Key) + len(e.Value) + len(e.PrevValue)
		page.Events = append(page.Events, e)
	}
	page.Next = through + 1
	r.resolveAll(m, &page)
	return page, nil
}

// resolver finds the values that events recorded by reference replaced:
// the value of the key's event at PrevVersion, in the page being read or
// else in the history.
type resolver struct {
	// latest: each key's last event so far in the page.
	latest map[string]*latestEvent
}

type latestEvent struct {
	index uint64
	del   bool
	value []byte
	terms []wire.IndexTerm
}

// saw notes e, the page's latest event of its key.
func (r *resolver) saw(e *Event) {
	if r.latest == nil {
		r.latest = map[string]*latestEvent{}
	}
	if l, ok := r.latest[string(e.Key)]; ok {
		l.index, l.del, l.value, l.terms = e.Index, e.Delete, e.Value, e.Terms
		return
	}
	r.latest[string(e.Key)] = &latestEvent{e.Index, e.Delete, e.Value, e.Terms}
}

// resolveInPage fills e's previous value from the page's events when the
// event it refers to is among them.
func (r *resolver) resolveInPage(e *Event) {
	if l, ok := r.latest[string(e.Key)]; ok && l.index == e.PrevVersion && !l.del {
		e.PrevValue, e.PrevTerms, e.prevRef = l.value, l.terms, false
	}
}

// resolveAll resolves the page's events that the page itself could not.
func (r *resolver) resolveAll(m *Machine, page *HistoryPage) {
	for i := range page.Events {
		if e := &page.Events[i]; e.prevRef {
			r.resolve(m, e, page.Floor)
		}
	}
}

// resolve fills e's previous value from the key's event at PrevVersion
// in the history, or marks it PrevMissing when that event is gone
// (at or below floor, or trimmed since the page's read began).
func (r *resolver) resolve(m *Machine, e *Event, floor uint64) {
	e.prevRef = false
	if e.PrevVersion <= floor {
		e.PrevMissing = true
		return
	}
	it, err := m.cfg.Engine.NewIter(storage.HistoryIndexStart(m.id, e.PrevVersion), storage.HistoryIndexStart(m.id, e.PrevVersion+1))
	if err != nil {
		e.PrevMissing = true
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		prev, err := decodeEvent(e.PrevVersion, it.Value())
		if err != nil || prev.Delete || !bytes.Equal(prev.Key, e.Key) {
			continue
		}
		e.PrevValue = append([]byte{}, prev.Value...)
		e.PrevTerms = cloneTerms(prev.Terms)
		return
	}
	e.PrevMissing = true
}

// cloneTerms copies terms out of a buffer about to be reused.
func cloneTerms(terms []wire.IndexTerm) []wire.IndexTerm {
	if len(terms) == 0 {
		return nil
	}
	out := make([]wire.IndexTerm, len(terms))
	for i, t := range terms {
		out[i] = wire.IndexTerm{Name: strings.Clone(t.Name), Term: bytes.Clone(t.Term)}
	}
	return out
}
