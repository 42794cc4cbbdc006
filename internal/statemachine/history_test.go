package statemachine

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// historyMachine is testMachine with a history of retention log indexes.
func historyMachine(t *testing.T, retention int) *Machine {
	m := testMachine(t)
	m.hist.retention = uint64(retention)
	m.versions.values = retention > 0
	if err := m.OpenHistory(0); err != nil {
		t.Fatal(err)
	}
	return m
}

func hput(key, value string) wire.Command {
	return wire.Command{RequestID: []byte("p" + key + value), Op: wire.OpPut, Key: []byte(key), Value: []byte(value)}
}

func hdel(key string, n int) wire.Command {
	return wire.Command{RequestID: fmt.Appendf(nil, "d%s%d", key, n), Op: wire.OpDelete, Key: []byte(key)}
}

func TestHistoryRecordsChanges(t *testing.T) {
	for _, cache := range []int{0, 100} {
		t.Run(fmt.Sprint("version cache ", cache), func(t *testing.T) {
			m := historyMachine(t, 1000)
			if cache > 0 {
				withVersionCache(m, cache)
			}
			testHistoryRecordsChanges(t, m)
		})
	}
}

func testHistoryRecordsChanges(t *testing.T, m *Machine) {
	cmds := []wire.Command{
		hput("a", "1"), // 1
		hput("b", "x"), // 2
		hput("a", "2"), // 3
		hdel("a", 1),   // 4
		hdel("a", 2),   // 5: absent, no event
		{RequestID: []byte("c"), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte("b"), Value: []byte("y")}, // 6: fails, no event
		hput("a", "3"), // 7
	}
	res := applyAll(m, cmds, func() int { return 3 })
	if res[3].Version != 4 {
		t.Fatalf("delete's version %d, want its own index 4", res[3].Version)
	}
	page, err := m.Events(1, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 put a=1 prev 0=", "2 put b=x prev 0=", "3 put a=2 prev 1=1",
		"4 del a prev 3=2", "7 put a=3 prev 0=",
	}
	if got := describe(page.Events); fmt.Sprint(got) != fmt.Sprint(want) || page.Next != 8 {
		t.Fatalf("events %q next %d, want %q next 8", got, page.Next, want)
	}
	// A read from the middle, and one bounded by through.
	if page, _ := m.Events(4, 5, 0); fmt.Sprint(describe(page.Events)) != "[4 del a prev 3=2]" || page.Next != 6 {
		t.Fatalf("events [4, 5]: %q next %d", describe(page.Events), page.Next)
	}
	// A byte bound stops between entries only.
	if page, _ := m.Events(1, 7, 1); len(page.Events) != 1 || page.Next != 2 {
		t.Fatalf("events from 1 bounded to 1 byte: %q next %d, want one event, next 2", describe(page.Events), page.Next)
	}
	// A batch entry's events share its index and keep their order.
	rd := m.Begin(nil)
	c, d := hput("c", "1"), hput("d", "1")
	m.ApplyEntry(rd, 8, 1, wire.MarshalStamped(0, [][]byte{c.Marshal(), d.Marshal()}))
	if err := m.Commit(rd); err != nil {
		t.Fatal(err)
	}
	if page, _ := m.Events(8, 8, 1); fmt.Sprint(describe(page.Events)) != "[8 put c=1 prev 0= 8 put d=1 prev 0=]" {
		t.Fatalf("batch events: %q", describe(page.Events))
	}
}

func TestHistoryTrimmedByRetention(t *testing.T) {
	m := historyMachine(t, 32) // trimmed 2 indexes at a time
	var cmds []wire.Command
	for i := range 100 {
		cmds = append(cmds, hput(fmt.Sprint("k", i%7), fmt.Sprint(i)))
	}
	applyAll(m, cmds, func() int { return 5 })
	floor := m.HistoryFloor()
	if floor < 100-32-2 || floor > 100-32 {
		t.Fatalf("floor %d after 100 entries with retention 32", floor)
	}
	_, err := m.Events(floor, 100, 0)
	var ce *CompactedError
	if !errors.As(err, &ce) || ce.Floor != floor {
		t.Fatalf("read from the floor: %v, want compacted at %d", err, floor)
	}
	page, err := m.Events(floor+1, 100, 0)
	if err != nil || len(page.Events) != int(100-floor) || page.Events[0].Index != floor+1 {
		t.Fatalf("read above the floor: %d events from %v, %v", len(page.Events), page.Events[0].Index, err)
	}
	// The floor survives a reopen; a machine without a floor record
	// starts its history after the applied index it is given.
	m2, err := Open(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.OpenHistory(100); err != nil || m2.HistoryFloor() != floor {
		t.Fatalf("reopened floor %d (%v), want %d", m2.HistoryFloor(), err, floor)
	}
	// Reopened without history, the history goes; with it again, it
	// starts after the applied index then.
	m3, _ := Open(Config{ShardID: 1, Engine: m.cfg.Engine, HistoryRetention: -1})
	if err := m3.OpenHistory(100); err != nil {
		t.Fatal(err)
	}
	m4, _ := Open(m.cfg)
	if err := m4.OpenHistory(120); err != nil || m4.HistoryFloor() != 120 {
		t.Fatalf("history on again: floor %d (%v), want 120", m4.HistoryFloor(), err)
	}
	fresh := testMachine(t)
	fresh.hist.retention = 10
	if err := fresh.OpenHistory(42); err != nil || fresh.HistoryFloor() != 42 {
		t.Fatalf("floor without a record: %d %v, want 42", fresh.HistoryFloor(), err)
	}
}

func describe(evs []Event) []string {
	var out []string
	for _, e := range evs {
		kind := "put"
		if e.Delete {
			kind = "del"
		}
		s := fmt.Sprintf("%d %s %s", e.Index, kind, e.Key)
		if !e.Delete {
			s += "=" + string(e.Value)
		}
		out = append(out, s+fmt.Sprintf(" prev %d=%s", e.PrevVersion, e.PrevValue))
	}
	return out
}

// A round longer than the retention trims its own early events: none at
// or below the floor is written, every one above it is.
func TestHistoryTrimmedWithinOneRound(t *testing.T) {
	m := historyMachine(t, 32)
	var cmds []wire.Command
	for i := range 100 {
		cmds = append(cmds, hput(fmt.Sprint("k", i%7), fmt.Sprint(i)))
	}
	applyAll(m, cmds, func() int { return 100 })
	floor := m.HistoryFloor()
	if floor < 100-32-2 || floor > 100-32 {
		t.Fatalf("floor %d after one round of 100 entries with retention 32", floor)
	}
	start, end := storage.HistorySpan(m.id)
	it, err := m.cfg.Engine.NewIter(start, end)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) < 17 {
			continue // the floor record, the byte windows
		}
		index, _, err := storage.DecodeHistoryKey(it.Key())
		if err != nil || index <= floor {
			t.Fatalf("event key %x (index %d, %v) at or below the floor %d", it.Key(), index, err, floor)
		}
		n++
	}
	if n != int(100-floor) {
		t.Fatalf("%d events stored, want %d", n, 100-floor)
	}
	page, err := m.Events(floor+1, 100, 0)
	if err != nil || len(page.Events) != int(100-floor) || string(page.Events[len(page.Events)-1].PrevValue) != "92" {
		t.Fatalf("read above the floor: %q, %v", describe(page.Events), err)
	}
}

// refMachine is historyMachine with a version cache that knows versions
// but keeps no values: its events give the value they replace by
// reference to the key's earlier event.
func refMachine(t *testing.T, retention int) *Machine {
	m := withVersionCache(historyMachine(t, retention), 100)
	m.versions.values = false
	return m
}

// Events recorded by reference read back as those recorded with the
// value, on a replica that read every replaced value: from the start,
// from the middle (the referred event outside the page) and page by page.
func TestHistoryPrevByReference(t *testing.T) {
	var cmds []wire.Command
	for i := range 60 {
		switch {
		case i%9 == 8:
			cmds = append(cmds, hdel(fmt.Sprint("k", i%5), i))
		default:
			cmds = append(cmds, hput(fmt.Sprint("k", i%5), fmt.Sprint(i)))
		}
	}
	read, ref := historyMachine(t, 1000), refMachine(t, 1000)
	applyAll(read, cmds, func() int { return 3 })
	applyAll(ref, cmds, func() int { return 3 })
	if storedKinds(ref, eventPutRef, eventDeleteRef) == 0 {
		t.Fatal("no event was recorded by reference")
	}
	sameEvents(t, read, ref, 60, []uint64{1, 7, 30, 59}, []int{0, 1, 40}, describe)
}

// storedKinds counts the events of m's history stored as one of kinds.
func storedKinds(m *Machine, kinds ...byte) int {
	n := 0
	start, end := storage.HistorySpan(m.id)
	it, _ := m.cfg.Engine.NewIter(start, end)
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) > 9 && slices.Contains(kinds, it.Value()[0]) {
			n++
		}
	}
	return n
}

// sameEvents checks that ref's history up to last reads back as read's,
// from each start and in pages of each size, with no previous value
// missing.
func sameEvents(t *testing.T, read, ref *Machine, last uint64, froms []uint64, sizes []int, show func([]Event) []string) {
	t.Helper()
	pages := func(m *Machine, from uint64, maxBytes int) []string {
		var out []string
		for f := from; f <= last; {
			p, err := m.Events(f, last, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Events {
				if e.PrevMissing {
					t.Fatalf("event %d: previous value missing", e.Index)
				}
			}
			out, f = append(out, show(p.Events)...), p.Next
		}
		return out
	}
	for _, from := range froms {
		for _, maxBytes := range sizes {
			if got, want := pages(ref, from, maxBytes), pages(read, from, maxBytes); !slices.Equal(got, want) {
				t.Fatalf("from %d, pages of %d bytes: by reference\n%q\nwant\n%q", from, maxBytes, got, want)
			}
		}
	}
}

// An event whose referred event was trimmed reads back PrevMissing, with
// its previous version; one refers back at most half the retention.
func TestHistoryPrevByReferenceTrimmed(t *testing.T) {
	m := refMachine(t, 16) // trimmed 1 index at a time
	cmds := []wire.Command{hput("a", "1")}
	for i := range 7 {
		cmds = append(cmds, hput(fmt.Sprint("x", i), "x"))
	}
	cmds = append(cmds, hput("a", "2")) // 9: refers to 1
	for i := range 9 {
		cmds = append(cmds, hput(fmt.Sprint("y", i), "y"))
	}
	cmds = append(cmds, hput("a", "3")) // 19: 10 back, more than 16/2: read
	applyAll(m, cmds, func() int { return 1 })
	if f := m.HistoryFloor(); f != 3 {
		t.Fatalf("floor %d, want 3", f)
	}
	p, err := m.Events(4, 19, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Events {
		switch e.Index {
		case 9:
			if !e.PrevMissing || e.PrevVersion != 1 || e.PrevValue != nil {
				t.Fatalf("event 9: %+v, want previous version 1, value missing", e)
			}
		case 19:
			if e.PrevMissing || e.PrevVersion != 9 || string(e.PrevValue) != "2" {
				t.Fatalf("event 19: %+v, want previous 9=2", e)
			}
		default:
			if e.PrevMissing {
				t.Fatalf("event %d: previous value missing", e.Index)
			}
		}
	}
}

// A machine opened over a shard without data knows every key: a key its
// cache does not hold is absent, until the cache drops a key.
func TestVersionCacheCompleteOnEmptyShard(t *testing.T) {
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	m, err := Open(Config{ShardID: 1, Engine: eng, VersionCache: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !m.versions.complete {
		t.Fatal("cache of an empty shard not complete")
	}
	ifAbsent := func(k string) wire.Command {
		return wire.Command{RequestID: []byte("c" + k), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte(k), Value: []byte("v")}
	}
	res := applyAll(m, []wire.Command{hput("a", "1"), ifAbsent("a"), ifAbsent("b"), hdel("c", 0)}, func() int { return 2 })
	if res[1].Status != wire.StatusPreconditionFailed || res[2].Status != wire.StatusOK || res[3].Status != wire.StatusNotFound {
		t.Fatalf("results %+v", res)
	}
	applyAll(m, []wire.Command{hput("d", "1"), hput("e", "1"), hput("f", "1")}, func() int { return 1 })
	if m.versions.complete {
		t.Fatal("cache still complete after dropping a key")
	}
	// Reopened over data: not complete; the dropped key is still known.
	m2, err := Open(Config{ShardID: 1, Engine: eng, VersionCache: 4})
	if err != nil {
		t.Fatal(err)
	}
	if m2.versions.complete {
		t.Fatal("cache complete over a shard with data")
	}
	if res := applyAll(m2, []wire.Command{ifAbsent("a")}, func() int { return 1 }); res[0].Status != wire.StatusPreconditionFailed {
		t.Fatalf("put if absent of an existing key: %+v", res[0])
	}
}
