package storage

import (
	"fmt"
	"testing"
)

// L0 is compacted at L0CompactionThreshold sublevels, not Pebble's 4:
// six overlapping flushes stay six sublevels (with Pebble's default a
// compaction would start at the fourth), and WriteStats reports them.
func TestL0WaitsForItsThreshold(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.po.L0CompactionThreshold != L0CompactionThreshold || e.po.L0StopWritesThreshold != L0StopWritesThreshold {
		t.Fatalf("L0 thresholds %d and %d, want %d and %d", e.po.L0CompactionThreshold, e.po.L0StopWritesThreshold,
			L0CompactionThreshold, L0StopWritesThreshold)
	}
	const flushes = 6
	for f := 0; f < flushes; f++ {
		b := e.NewBatch()
		for k := 0; k < 100; k++ { // every flush spans the same keys
			b.Set(DataKey(uint64(k), []byte(fmt.Sprintf("k%03d", k))), []byte(fmt.Sprintf("v%d", f)))
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		if err := e.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.WriteStats().L0Sublevels; got != flushes {
		t.Errorf("L0 has %d sublevels after %d overlapping flushes, want %d (none compacted below the threshold)", got, flushes, flushes)
	}
}
