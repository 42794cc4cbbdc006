package statemachine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// bigPuts is n puts of size-byte values over 5 keys.
func bigPuts(n, size int) []wire.Command {
	cmds := make([]wire.Command, n)
	for i := range cmds {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		cmds[i] = wire.Command{RequestID: fmt.Appendf(nil, "b%d", i), Op: wire.OpPut, Key: fmt.Appendf(nil, "k%d", i%5), Value: v}
	}
	return cmds
}

// historyDiskBytes is the size of the keys and values under the shard's
// history span, as stored.
func historyDiskBytes(t *testing.T, m *Machine) int {
	start, end := storage.HistorySpan(m.id)
	it, err := m.cfg.Engine.NewIter(start, end)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n += len(it.Key()) + len(it.Value())
	}
	return n
}

// The history is bounded in bytes as well as in log indexes: 400 puts of
// 4 KiB (1.6 MiB) with a retention of 20,000 indexes and a bound of
// 64 KiB keep about the bound, the newest events, with none missing
// above the floor. Without the byte bound every event would stay.
func TestHistoryBoundedInBytes(t *testing.T) {
	const bound = 64 << 10
	m := historyMachine(t, 20000)
	m.hist.maxBytes = bound
	applyAll(m, bigPuts(400, 4096), func() int { return 3 })
	floor := m.HistoryFloor()
	if floor == 0 {
		t.Fatal("no event trimmed: the history is not bounded in bytes")
	}
	// The windows may pass the bound by the newest window (a sixteenth
	// of it, or one entry).
	if got := windowsBytes(m.hist.windows); got > bound+bound/16+4096+eventOverhead {
		t.Fatalf("windows count %d bytes, bound %d", got, bound)
	}
	// What is stored: every event keeps its value, and its replaced one
	// (up to twice the counted bytes).
	if got := historyDiskBytes(t, m); got > 3*bound {
		t.Fatalf("%d bytes stored under the history, bound %d", got, bound)
	}
	if floor < 400-2*bound/4096 {
		t.Fatalf("floor %d: fewer events trimmed than the bound asks", floor)
	}
	page, err := m.Events(floor+1, 400, 0)
	if err != nil || len(page.Events) != int(400-floor) {
		t.Fatalf("events above the floor %d: %d, %v", floor, len(page.Events), err)
	}
	for i, e := range page.Events {
		if e.Index != floor+1+uint64(i) || len(e.Value) != 4096 {
			t.Fatalf("event %d: index %d, value of %d bytes", i, e.Index, len(e.Value))
		}
	}
	if _, err := m.Events(floor, 400, 0); err == nil {
		t.Fatal("a read from the floor is not compacted")
	}
}

// Every replica trims at the same indexes, however its entries were
// grouped into rounds, and a restart goes on with the same count.
func TestHistoryBytesSameOnEveryReplica(t *testing.T) {
	const bound = 32 << 10
	cmds := bigPuts(300, 1000)
	var floors []uint64
	var windows []string
	for _, size := range []int{1, 7, 64} {
		m := historyMachine(t, 20000)
		m.hist.maxBytes = bound
		half := len(cmds) / 2
		applyAll(m, cmds[:half], func() int { return size })
		// A restart halfway: the windows come back from the engine.
		before := fmt.Sprint(m.hist.windows)
		m.hist.windows = nil
		if err := m.OpenHistory(uint64(half)); err != nil {
			t.Fatal(err)
		}
		if after := fmt.Sprint(m.hist.windows); after != before {
			t.Fatalf("rounds of %d: windows %s after a restart, %s before", size, after, before)
		}
		applyRoundsFrom(m, cmds, half, size)
		floors = append(floors, m.HistoryFloor())
		windows = append(windows, fmt.Sprint(m.hist.windows))
	}
	for i := range floors {
		if floors[i] != floors[0] || windows[i] != windows[0] {
			t.Fatalf("floors %v, windows %v: replicas differ", floors, windows)
		}
	}
	if floors[0] == 0 {
		t.Fatal("nothing trimmed: the test proves nothing")
	}
}

// applyRoundsFrom applies cmds[from:] in rounds of size, command j at
// index j+1.
func applyRoundsFrom(m *Machine, cmds []wire.Command, from, size int) {
	for i := from; i < len(cmds); i += size {
		applyRound(m, cmds, nil, i, min(i+size, len(cmds)), nil)
	}
}

// The windows' record round-trips, and a damaged one is refused.
func TestHistoryWindowsEncoding(t *testing.T) {
	ws := []histWindow{{1, 1250, 70000}, {1251, 1300, 1 << 40}}
	got, err := decodeWindows(encodeWindows(ws))
	if err != nil || fmt.Sprint(got) != fmt.Sprint(ws) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if got, err := decodeWindows(encodeWindows(nil)); err != nil || len(got) != 0 {
		t.Fatalf("no windows: %v %v", got, err)
	}
	b := encodeWindows(ws)
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(b, 0), {0xff}} {
		if _, err := decodeWindows(bad); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}
