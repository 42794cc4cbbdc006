package storage

import (
	"bytes"
	"testing"
)

func TestHistoryKeysOrder(t *testing.T) {
	floor := HistoryFloorKey(7)
	a := HistoryKey(7, 5, 0)
	b := HistoryKey(7, 5, 1)
	c := HistoryKey(7, 6, 0)
	other := HistoryKey(8, 1, 0)
	for i, pair := range [][2][]byte{{floor, a}, {a, b}, {b, c}, {c, other}, {HistoryIndexStart(7, 5), a}, {b, HistoryIndexStart(7, 6)}} {
		if bytes.Compare(pair[0], pair[1]) >= 0 {
			t.Fatalf("pair %d: %x does not sort before %x", i, pair[0], pair[1])
		}
	}
	start, end := HistorySpan(7)
	if !bytes.Equal(start, floor) || bytes.Compare(c, end) >= 0 || bytes.Compare(other, end) < 0 {
		t.Fatalf("span [%x, %x) does not hold exactly shard 7's history", start, end)
	}
	idx, pos, err := DecodeHistoryKey(b)
	if err != nil || idx != 5 || pos != 1 {
		t.Fatalf("decode %x: %d %d %v", b, idx, pos, err)
	}
	if _, _, err := DecodeHistoryKey(floor); err == nil {
		t.Fatal("the floor key decoded as an event key")
	}
	// The history is outside the data and derived-index ranges.
	if _, de := DataSpan(0, 0); bytes.Compare(floor, de) < 0 || floor[0] < prefixDerivedEnd {
		t.Fatal("history keys overlap the data or the derived indexes")
	}
}

func TestAppendHistoryKey(t *testing.T) {
	got := AppendHistoryKey([]byte("x"), 7, 5, 3)
	if want := append([]byte("x"), HistoryKey(7, 5, 3)...); string(got) != string(want) {
		t.Fatalf("AppendHistoryKey %x, want %x", got, want)
	}
}
