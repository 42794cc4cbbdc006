package replica

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// applyPuts applies one put of key=value per index in [from, to] through
// r's state machine, as committed entries would be, and records the
// applied index.
func applyPuts(t *testing.T, r *Replica, from, to uint64, key string) {
	t.Helper()
	rd := r.sm.Begin(nil)
	for i := from; i <= to; i++ {
		c := wire.Command{RequestID: fmt.Appendf(nil, "%s%d", key, i), Op: wire.OpPut, Key: []byte(key), Value: fmt.Appendf(nil, "v%d", i)}
		r.sm.ApplyEntry(rd, i, 5, c.Marshal())
	}
	as := raftlog.AppliedState{Index: to, Term: 5, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	rd.Set(storage.AppliedKey(1), as.Marshal())
	if err := r.sm.Commit(rd); err != nil {
		t.Fatal(err)
	}
	r.applied.Store(to)
}

// A snapshot carries the shard's history: the receiver serves the
// sender's events and floor, and none of its own earlier ones.
func TestSnapshotCarriesHistory(t *testing.T) {
	src := openNode(t, 1)
	floor := src.sm.HistoryFloor() // the bootstrap's applied index
	if floor > 10 {
		t.Fatalf("a new shard's history floor is %d", floor)
	}
	applyPuts(t, src, 11, 50, "k")
	dst := openNode(t, 2)
	applyPuts(t, dst, 60, 62, "old") // ahead of the snapshot: must go too
	ch := dst.AppliedChanged()
	m := outgoingSnapshot(t, src)
	s, err := src.OpenSnapshot(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunks := readAll(t, s)
	s.Close()
	if ok, err := receive(t, dst, m, chunks, nil); err != nil || !ok {
		t.Fatalf("receive: %v %v", ok, err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("installing a snapshot did not wake history readers")
	}
	if dst.Applied() != 50 {
		t.Fatalf("applied %d after the snapshot", dst.Applied())
	}
	page, err := dst.sm.Events(11, 100, 0) // past the applied index: nothing of dst's own
	if err != nil || len(page.Events) != 40 || page.Next != 101 || page.Floor != floor {
		t.Fatalf("history after the snapshot: %d events, next %d, floor %d, %v; want 40, 101, %d", len(page.Events), page.Next, page.Floor, err, floor)
	}
	for i, e := range page.Events {
		if string(e.Key) != "k" || e.Index != uint64(i+11) || string(e.Value) != fmt.Sprint("v", i+11) {
			t.Fatalf("event %d: %s=%s@%d", i, e.Key, e.Value, e.Index)
		}
		if i > 0 && (e.PrevVersion != uint64(i+10) || string(e.PrevValue) != fmt.Sprint("v", i+10)) {
			t.Fatalf("event %d replaced %s@%d", i, e.PrevValue, e.PrevVersion)
		}
	}
}
