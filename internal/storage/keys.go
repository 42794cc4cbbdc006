package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	prefixMeta  = 0x00
	prefixLocal = 0x01
	prefixData  = 0x02
	prefixEnd   = 0x03
)

// Suffixes of shard-local keys.
const (
	suffixHardState = 'h'
	suffixApplied   = 'a'
	suffixTruncated = 't'
	suffixLog       = 'l'
	suffixDedup     = 'g'
	// Earlier layouts of the dedup table (see LegacyDedupPrefixes).
	suffixLegacyDedupRecord = 'd'
	suffixLegacyDedup       = 'q'
	suffixLegacyDedupAge    = 'Q'
)

// ErrCorrupt is returned when stored bytes cannot be decoded.
var ErrCorrupt = errors.New("storage: corrupt record")

// MetaKey is the key of a node metadata record.
func MetaKey(name string) []byte { return append([]byte{prefixMeta, 'm', 'e', 't', 'a', '/'}, name...) }

func localKey(shard uint64, suffix byte, extra int) []byte {
	k := make([]byte, 10, 10+extra)
	k[0] = prefixLocal
	binary.BigEndian.PutUint64(k[1:], shard)
	k[9] = suffix
	return k
}

// HardStateKey is the key of a shard's raft HardState.
func HardStateKey(shard uint64) []byte { return localKey(shard, suffixHardState, 0) }

// AppliedKey is the key of a shard's applied state.
func AppliedKey(shard uint64) []byte { return localKey(shard, suffixApplied, 0) }

// TruncatedKey is the key of a shard's truncated-log state.
func TruncatedKey(shard uint64) []byte { return localKey(shard, suffixTruncated, 0) }

// LogKey is the key of a shard's raft log entry at index.
func LogKey(shard, index uint64) []byte {
	k := localKey(shard, suffixLog, 8)
	return binary.BigEndian.AppendUint64(k, index)
}

// LogIndex decodes the index from a LogKey.
func LogIndex(key []byte) (uint64, error) {
	if len(key) != 18 || key[0] != prefixLocal || key[9] != suffixLog {
		return 0, fmt.Errorf("%w: log key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[10:]), nil
}

// DedupKey is the key of a shard's dedup group: the records of the
// commands of the entry at index whose proposer time fell in bucket.
// Groups sort by bucket, so records are dropped a bucket at a time.
func DedupKey(shard, bucket, index uint64) []byte {
	k := localKey(shard, suffixDedup, 16)
	k = binary.BigEndian.AppendUint64(k, bucket)
	return binary.BigEndian.AppendUint64(k, index)
}

// DedupBucketStart is the smallest dedup key of a bucket: the groups of
// buckets [a, b) are [DedupBucketStart(a), DedupBucketStart(b)).
func DedupBucketStart(shard, bucket uint64) []byte {
	return binary.BigEndian.AppendUint64(localKey(shard, suffixDedup, 8), bucket)
}

// DedupPrefix bounds all dedup keys of a shard: [DedupPrefix, PrefixEnd(DedupPrefix)).
func DedupPrefix(shard uint64) []byte { return localKey(shard, suffixDedup, 0) }

// DecodeDedupKey returns the bucket and entry index of a DedupKey.
func DecodeDedupKey(key []byte) (bucket, index uint64, err error) {
	if len(key) != 26 || key[0] != prefixLocal || key[9] != suffixDedup {
		return 0, 0, fmt.Errorf("%w: dedup key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[10:18]), binary.BigEndian.Uint64(key[18:]), nil
}

// LegacyDedupPrefixes bound the dedup records of earlier layouts (one
// record per id in a time bucket; before that, one per id and an age
// index), which replicas drop when they open.
func LegacyDedupPrefixes(shard uint64) [][]byte {
	return [][]byte{localKey(shard, suffixLegacyDedupRecord, 0), localKey(shard, suffixLegacyDedup, 0), localKey(shard, suffixLegacyDedupAge, 0)}
}

// ShardLocalSpan returns [start, end) covering every local key of a shard.
func ShardLocalSpan(shard uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = prefixLocal
	binary.BigEndian.PutUint64(start[1:], shard)
	return start, PrefixEnd(start)
}

// DataKey is the key under which user key k (with token tok) is stored.
func DataKey(tok uint64, k []byte) []byte {
	b := make([]byte, 9, 9+len(k))
	b[0] = prefixData
	binary.BigEndian.PutUint64(b[1:], tok)
	return append(b, k...)
}

// DecodeDataKey splits a DataKey into token and user key (aliasing key).
func DecodeDataKey(key []byte) (tok uint64, k []byte, err error) {
	if len(key) < 9 || key[0] != prefixData {
		return 0, nil, fmt.Errorf("%w: data key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[1:9]), key[9:], nil
}

// DataSpan returns the Pebble key range [start, end) of token range
// [tokStart, tokEnd) where tokEnd == 0 means 2^64.
func DataSpan(tokStart, tokEnd uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = prefixData
	binary.BigEndian.PutUint64(start[1:], tokStart)
	if tokEnd == 0 {
		return start, []byte{prefixEnd}
	}
	end = make([]byte, 9)
	end[0] = prefixData
	binary.BigEndian.PutUint64(end[1:], tokEnd)
	return start, end
}

// PrefixEnd returns the smallest key greater than every key with prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// EncodeValue encodes a stored user value: version(8) | data.
func EncodeValue(version uint64, data []byte) []byte {
	b := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint64(b, version)
	return append(b, data...)
}

// DecodeValue splits a stored value, skipping its metadata if it has any
// (EncodeValueMeta); data aliases b.
func DecodeValue(b []byte) (version uint64, data []byte, err error) {
	version, _, data, err = splitValue(b)
	return version, data, err
}
