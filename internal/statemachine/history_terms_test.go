package statemachine

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// An event carries the index terms of the new object and of the one it
// replaced (the etcd API reports a key's lease from them); events of
// writes without terms on either side keep the encoding they had before
// terms were recorded.
func TestHistoryRecordsTerms(t *testing.T) {
	m := historyMachine(t, 1000)
	lease := []wire.IndexTerm{{Name: "etcd-lease_int", Term: wire.EncodeIntTerm(7)}}
	withTerms := hput("a", "1")
	withTerms.Index = lease
	cmds := []wire.Command{
		withTerms,      // 1: terms, none replaced
		hput("a", "2"), // 2: none, replaces terms
		hput("a", "3"), // 3: none on either side
		{RequestID: []byte("t4"), Op: wire.OpPut, Key: []byte("a"), Value: []byte("4"), Index: lease}, // 4
		hdel("a", 1), // 5: a delete of an object with terms
	}
	applyAll(m, cmds, func() int { return 1 })
	page, err := m.Events(1, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	terms := func(ts []wire.IndexTerm) string {
		if len(ts) == 0 {
			return "-"
		}
		return fmt.Sprintf("%s=%s", ts[0].Name, ts[0].Text())
	}
	var got []string
	for _, e := range page.Events {
		got = append(got, fmt.Sprintf("%d %s/%s", e.Index, terms(e.Terms), terms(e.PrevTerms)))
	}
	want := "[1 etcd-lease_int=7/- 2 -/etcd-lease_int=7 3 -/- 4 etcd-lease_int=7/- 5 -/etcd-lease_int=7]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events' terms %q, want %s", got, want)
	}
	if b := encodeEvent(&Event{Key: []byte("a"), Value: []byte("3"), PrevVersion: 2, PrevValue: []byte("2")}); b[0] != eventPut {
		t.Fatalf("an event without terms is encoded as kind %q, want %q", b[0], eventPut)
	}
	for _, e := range []Event{{Delete: true, Key: []byte("k"), PrevVersion: 3, PrevValue: []byte("v"), PrevTerms: lease},
		{Key: []byte("k"), Value: []byte("v"), Terms: lease}} {
		d, err := decodeEvent(9, encodeEvent(&e))
		if err != nil || d.Delete != e.Delete || terms(d.Terms) != terms(e.Terms) || terms(d.PrevTerms) != terms(e.PrevTerms) ||
			string(d.Value) != string(e.Value) || string(d.PrevValue) != string(e.PrevValue) || d.PrevVersion != e.PrevVersion {
			t.Fatalf("round trip of %+v: %+v %v", e, d, err)
		}
	}
}
