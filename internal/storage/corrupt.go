package storage

import (
	"errors"
	"fmt"
)

// CorruptValues damages user data the way rotting or mishandled files
// would, for the chaos lab's corrupt fault (`cairn debug corrupt`, run
// on a stopped node's data dir): it rewrites up to n values of the token
// range [start, end) (end 0: 2^64), every step-th key from the first,
// with the data's bytes inverted and the version and index terms kept,
// in one synced batch. Pebble's checksums stay valid (the new values are
// written through Pebble), so only comparing the data with the other
// replicas' finds it. It returns the keys changed.
func CorruptValues(e *Engine, start, end uint64, n, step int) ([][]byte, error) {
	if n <= 0 || step <= 0 {
		return nil, errors.New("storage: CorruptValues needs n and step above 0")
	}
	lo, hi := DataSpan(start, end)
	it, err := e.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	b := e.NewBatch()
	var keys [][]byte
	i := 0
	for ok := it.First(); ok && len(keys) < n; ok = it.Next() {
		if i++; (i-1)%step != 0 {
			continue
		}
		version, terms, data, err := DecodeValueMeta(it.Value())
		if err != nil || len(data) == 0 {
			continue
		}
		bad := make([]byte, len(data))
		for j, c := range data {
			bad[j] = ^c
		}
		k := append([]byte(nil), it.Key()...)
		b.Set(k, EncodeValueMeta(version, terms, bad))
		keys = append(keys, k[9:])
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if err := b.Commit(true); err != nil {
		return nil, fmt.Errorf("storage: corrupt values: %w", err)
	}
	return keys, nil
}
