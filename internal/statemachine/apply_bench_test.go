package statemachine

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Unconditional puts of 256-byte values over 3334 keys, random, 64 to an
// entry and 4 entries to a round: one replica's share of `cairn bench
// --workload put` (10000 keys over three shards), with the change history
// on (the default) and off; and the same over 30000 keys, more than the
// version cache holds.
// go test -run - -bench ApplyOverwrites -benchtime 200000x ./internal/statemachine
func BenchmarkApplyOverwrites(b *testing.B) {
	for _, c := range []struct{ keys, history int }{{3334, -1}, {3334, 0}, {30000, -1}, {30000, 0}} {
		history, keys := c.history, c.keys
		name := fmt.Sprintf("history=%v", history == 0)
		if keys != 3334 {
			name = fmt.Sprintf("keys=%d/%s", keys, name)
		}
		b.Run(name, func(b *testing.B) {
			eng, err := storage.Open(b.TempDir(), storage.Options{CacheSize: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			m, err := Open(Config{ShardID: 1, Engine: eng, HistoryRetention: history})
			if err != nil {
				b.Fatal(err)
			}
			if err := m.OpenHistory(0); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewSource(1))
			val := make([]byte, 256)
			var entries [4][][]byte
			index := uint64(0)
			b.ResetTimer()
			for i := 0; i < b.N; {
				rd := m.Begin(nil)
				for e := range entries {
					entries[e] = entries[e][:0]
					for j := 0; j < 64 && i < b.N; j, i = j+1, i+1 {
						r.Read(val[:8])
						c := wire.Command{RequestID: fmt.Appendf(nil, "id%d", i), Op: wire.OpPut, Key: fmt.Appendf(nil, "%08d", r.Intn(keys)), Value: val}
						entries[e] = append(entries[e], c.Marshal())
					}
					if len(entries[e]) > 0 {
						index++
						m.ApplyEntry(rd, index, 1, wire.MarshalStamped(0, entries[e]))
					}
				}
				if err := m.Commit(rd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
