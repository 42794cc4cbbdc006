package wire

import "testing"

// Every kind of Raft entry is told apart by its first byte: two kinds
// sharing one would make a replica apply one as the other.
func TestEntryKindsHaveDistinctFirstBytes(t *testing.T) {
	kinds := map[string]byte{
		"commandV1": commandV1, "batchV1": batchV1, "commandV2": commandV2,
		"stampedV1": stampedV1, "scrubV1": scrubV1, "splitV1": splitV1,
	}
	seen := map[byte]string{}
	for name, b := range kinds {
		if other, ok := seen[b]; ok {
			t.Errorf("%s and %s both start entries with byte %d", name, other, b)
		}
		seen[b] = name
	}
	if _, ok := ScrubEntry(Split{Shard: 1, Epoch: 1, End: 1 << 40, Mid: 1 << 39, Child: 1 << 39}.Marshal()); ok {
		t.Error("a split entry decodes as a scrub entry")
	}
	if IsSplit(MarshalScrub(7)) {
		t.Error("a scrub entry is taken for a split")
	}
}
