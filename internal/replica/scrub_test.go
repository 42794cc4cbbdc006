package replica

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// scrubCall is one Config.OnScrub call.
type scrubCall struct {
	id, index uint64
	snap      *storage.Snapshot
}

// A scrub entry applied in the same round as a later write still hands
// over the data at exactly its own index: the round is committed at the
// scrub entry and the snapshot pinned there.
func TestScrubEntrySnapshotsTheDataAtItsIndex(t *testing.T) {
	calls := make(chan scrubCall, 4)
	r := singleReplicaWith(t, Config{OnScrub: func(shardID, id, index, start, end uint64, snap *storage.Snapshot) {
		calls <- scrubCall{id, index, snap}
	}})
	put := func(value string) <-chan Result {
		out := make(chan Result, 1)
		go func() {
			res, err := r.Propose(context.Background(), &wire.Command{RequestID: []byte(value), Op: wire.OpPut, Key: []byte("k"), Value: []byte(value)})
			if err != nil {
				t.Errorf("put %s: %v", value, err)
			}
			out <- res
		}()
		return out
	}
	waitQueued := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			r.in.Lock()
			q := len(r.in.props)
			r.in.Unlock()
			if q == n {
				return
			}
		}
		t.Fatal("proposal not queued")
	}
	run := func(ch <-chan Result) Result {
		for {
			r.Process()
			select {
			case res := <-ch:
				return res
			case <-time.After(time.Millisecond):
			}
		}
	}
	first := put("before")
	waitQueued(1)
	v1 := run(first)
	// The scrub (an inbox report, proposed first) and the next write go
	// into the same entries, the same commit and the same apply round.
	r.ProposeScrub(42)
	second := put("after")
	waitQueued(1)
	v2 := run(second)
	var c scrubCall
	select {
	case c = <-calls:
	default:
		t.Fatal("no OnScrub call")
	}
	defer c.snap.Close()
	if c.id != 42 || c.index <= v1.Version || c.index >= v2.Version {
		t.Fatalf("scrub %d at index %d; writes at %d and %d", c.id, c.index, v1.Version, v2.Version)
	}
	b, err := c.snap.Get(storage.DataKey(shard.Token([]byte("k")), []byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	if version, _, data, _ := storage.DecodeValueMeta(b); version != v1.Version || string(data) != "before" {
		t.Fatalf("the scrub's snapshot holds %q at version %d, want %q at %d", data, version, "before", v1.Version)
	}
	ab, err := c.snap.Get(storage.AppliedKey(1))
	if err != nil {
		t.Fatal(err)
	}
	if as, err := raftlog.UnmarshalAppliedState(ab); err != nil || as.Index != c.index {
		t.Fatalf("the snapshot's applied index %d (%v), want the scrub's %d", as.Index, err, c.index)
	}
	if got, ver, _ := r.Get([]byte("k")); string(got) != "after" || ver != v2.Version {
		t.Fatalf("after the round the replica holds %q at %d", got, ver)
	}
}
