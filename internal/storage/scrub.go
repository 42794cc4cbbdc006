package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// DataHashes fingerprints the user data of the token range [start, end)
// (end 0: 2^64) in s: the range is cut into leaves equal token
// sub-ranges, and each gets the xxhash64 of its keys and values in key
// order (each length-prefixed, so no two contents collide by
// concatenation). keys is the number of user keys seen. Replicas whose
// data agree get the same leaves; a differing value changes the leaf of
// its token only.
func DataHashes(s *Snapshot, start, end uint64, leaves int) (hashes []uint64, keys uint64, err error) {
	if leaves <= 0 {
		return nil, 0, errors.New("storage: DataHashes needs at least one leaf")
	}
	lo, hi := DataSpan(start, end)
	it, err := s.NewIter(lo, hi)
	if err != nil {
		return nil, 0, err
	}
	digests := make([]*xxhash.Digest, leaves)
	for i := range digests {
		digests[i] = xxhash.New()
	}
	var n [binary.MaxVarintLen64]byte
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) < 9 {
			continue
		}
		tok := binary.BigEndian.Uint64(k[1:9])
		d := digests[Leaf(tok, start, end, leaves)]
		_, _ = d.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		_, _ = d.Write(k)
		_, _ = d.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		_, _ = d.Write(v)
		keys++
	}
	if err := it.Close(); err != nil {
		return nil, 0, fmt.Errorf("storage: hash data: %w", err)
	}
	hashes = make([]uint64, leaves)
	for i, d := range digests {
		hashes[i] = d.Sum64()
	}
	return hashes, keys, nil
}

// Leaf is the index of the token sub-range tok falls in when [start, end)
// (end 0: 2^64) is cut into leaves equal parts.
func Leaf(tok, start, end uint64, leaves int) int {
	off := tok - start
	span := end - start // 0: the whole 2^64 token space
	hi, lo := bits.Mul64(off, uint64(leaves))
	if span == 0 {
		return int(hi)
	}
	if hi >= span { // tok outside the range: clamp
		return leaves - 1
	}
	q, _ := bits.Div64(hi, lo, span)
	return int(min(q, uint64(leaves-1)))
}

// VerifyChecksums reads every block of every live sstable of the engine
// from its file (not from the block cache) and checks its checksum. It
// returns the number of tables checked and the first corruption found,
// naming the file. A table that a compaction deleted meanwhile is skipped.
func (e *Engine) VerifyChecksums(ctx context.Context) (tables int, err error) {
	levels, err := e.db.SSTables()
	if err != nil {
		return 0, fmt.Errorf("storage: list sstables: %w", err)
	}
	ro := e.po.MakeReaderOptions()
	fs := e.po.FS
	seen := map[uint64]bool{}
	for _, level := range levels {
		for _, t := range level {
			if ctx.Err() != nil {
				return tables, ctx.Err()
			}
			num := uint64(t.BackingSSTNum)
			if seen[num] || t.BackingType != pebble.BackingTypeLocal {
				continue // checked already, or not a local file
			}
			seen[num] = true
			path := fs.PathJoin(e.dir, fmt.Sprintf("%06d.sst", num))
			f, err := fs.Open(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return tables, fmt.Errorf("storage: open %s: %w", path, err)
			}
			err = validateTable(ctx, f, ro)
			if err != nil {
				return tables, fmt.Errorf("storage: %s: %w", path, err)
			}
			tables++
		}
	}
	return tables, nil
}

func validateTable(ctx context.Context, f sstable.ReadableFile, ro sstable.ReaderOptions) error {
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	r, err := sstable.NewReader(ctx, readable, ro)
	if err != nil {
		readable.Close()
		return err
	}
	err = r.ValidateBlockChecksums()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}
