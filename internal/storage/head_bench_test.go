package storage

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// HEAD decodes an object's metadata in place; GET copies its value out.
// go test -run - -bench HeadVsGet ./internal/storage
func BenchmarkHeadVsGet(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		e, err := Open(b.TempDir(), Options{CacheSize: 256 << 20})
		if err != nil {
			b.Fatal(err)
		}
		val := make([]byte, size)
		terms := []wire.IndexTerm{{Name: "e_bin", Term: []byte("x@y")}}
		const n = 64
		bt := e.NewBatch()
		for i := 0; i < n; i++ {
			bt.Set(DataKey(uint64(i), []byte(fmt.Sprint(i))), EncodeValueMeta(1, terms, val))
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		key := func(i int) []byte { return DataKey(uint64(i%n), []byte(fmt.Sprint(i%n))) }
		b.Run(fmt.Sprintf("get/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				v, err := e.Get(key(i))
				if err != nil {
					b.Fatal(err)
				}
				if _, _, _, err := DecodeValueMeta(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("head/%dKiB", size>>10), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := e.HeadValue(key(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
		e.Close()
	}
}
