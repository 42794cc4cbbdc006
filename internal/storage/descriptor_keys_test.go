package storage

import (
	"reflect"
	"testing"
)

// LocalShards finds every shard with a shard-local key, whatever its
// suffix (replica state or only a tombstone), and nothing from the data
// or meta spaces.
func TestLocalShards(t *testing.T) {
	e, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	b.Set(LogKey(3, 10), []byte("e"))
	b.Set(LogKey(3, 11), []byte("e"))
	b.Set(AppliedKey(3), []byte("a"))
	b.Set(TombstoneKey(7), []byte("t"))
	b.Set(DescriptorKey(1<<40), []byte("d"))
	b.Set(DataKey(5, []byte("k")), []byte("v"))
	b.Set(MetaKey("identity"), []byte("{}"))
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	got, err := LocalShards(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{3, 7, 1 << 40}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	// Tombstone and descriptor keys sort inside the shard's local span.
	s, end := ShardLocalSpan(7)
	if k := string(TombstoneKey(7)); k < string(s) || k >= string(end) {
		t.Fatal("tombstone outside the shard's local span")
	}
}
