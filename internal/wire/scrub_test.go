package wire

import (
	"slices"
	"testing"
)

func TestScrubEntryAndResultRoundTrip(t *testing.T) {
	id, ok := ScrubEntry(MarshalScrub(1<<63 + 5))
	if !ok || id != 1<<63+5 {
		t.Fatalf("ScrubEntry = %d, %v", id, ok)
	}
	// Commands, batches and stamped entries are not scrub entries; a
	// Cairn without scrubbing skips a scrub entry as a bad command.
	for _, data := range [][]byte{(&Command{Op: OpPut, Key: []byte("k")}).Marshal(), MarshalBatch(nil), MarshalStamped(1, nil), {scrubV1}, append(MarshalScrub(1), 0)} {
		if _, ok := ScrubEntry(data); ok {
			t.Errorf("ScrubEntry(%x) = ok", data)
		}
	}
	var c Command
	if err := c.Unmarshal(MarshalScrub(7)); err == nil {
		t.Error("a scrub entry decodes as a command")
	}
	r := ScrubResult{ID: 9, Index: 1234, Keys: 77, Root: ^uint64(0), Leaves: []uint64{1, 2, ^uint64(0)}}
	var got ScrubResult
	if err := got.Unmarshal(r.Marshal()); err != nil || got.ID != 9 || got.Index != 1234 || got.Keys != 77 || got.Root != r.Root || !slices.Equal(got.Leaves, r.Leaves) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if err := got.Unmarshal(r.Marshal()[:5]); err == nil {
		t.Error("a truncated result decodes")
	}
}
