package statemachine

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// The cost the derived indexes add to applying writes: unconditional puts
// of new keys on a replica that does not answer them, without terms (the
// key-order entry only) and with two terms each (the shard then reads
// every key before writing it).
// go test -run - -bench ApplyPuts ./internal/statemachine
func BenchmarkApplyPuts(b *testing.B) {
	for _, c := range []struct {
		terms   int
		history int // HistoryRetention: -1 none, 0 the default
	}{{0, -1}, {0, 0}, {2, 0}} {
		terms := c.terms
		b.Run(fmt.Sprintf("terms=%d/history=%v", terms, c.history == 0), func(b *testing.B) {
			eng, err := storage.Open(b.TempDir(), storage.Options{CacheSize: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			m, err := Open(Config{ShardID: 1, Engine: eng, VersionCache: -1, HistoryRetention: c.history})
			if err != nil {
				b.Fatal(err)
			}
			val := make([]byte, 256)
			cmds := make([]wire.Command, 0, 64)
			b.ResetTimer()
			for i := 0; i < b.N; {
				cmds = cmds[:0]
				for j := 0; j < 64 && i < b.N; j, i = j+1, i+1 {
					c := wire.Command{RequestID: []byte(fmt.Sprint("id", i)), Op: wire.OpPut, Key: []byte(fmt.Sprintf("key-%09d", i)), Value: val}
					for t := 0; t < terms; t++ {
						c.Index = append(c.Index, wire.IndexTerm{Name: fmt.Sprintf("t%d_int", t), Term: wire.EncodeIntTerm(int64(i % 1000))})
					}
					cmds = append(cmds, c)
				}
				rd := m.Begin(nil)
				for j := range cmds {
					m.ApplyEntry(rd, uint64(i-len(cmds)+j+1), 1, cmds[j].Marshal())
				}
				if err := m.Commit(rd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
