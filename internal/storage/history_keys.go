package storage

import (
	"encoding/binary"
	"fmt"
)

// prefixHistory is the first byte of a shard's change history: the
// events of its recent writes, which the etcd API's watches read
// (internal/statemachine/history.go). It sits past the derived indexes
// (prefixDerivedEnd) and is not derived: it is part of the shard's
// replicated state, written in the apply batch of the writes it records
// and carried by snapshots.
const prefixHistory = 0x06

// HistoryFloorKey is the key of a shard's history floor record: the
// highest log index whose events are gone (trimmed, or before the history
// began). It sorts before every event of the shard.
func HistoryFloorKey(shard uint64) []byte {
	k := make([]byte, 9, 9+12)
	k[0] = prefixHistory
	binary.BigEndian.PutUint64(k[1:], shard)
	return k
}

// HistoryBytesKey is the key of the record that counts a shard's history
// in bytes (internal/statemachine/history_bytes.go). It sorts after the
// floor record and before every event (an event's index is at least 1),
// inside HistorySpan, so snapshots carry it.
func HistoryBytesKey(shard uint64) []byte {
	return append(HistoryFloorKey(shard), 0)
}

// HistoryKey is the key of the event at position pos of the entry at log
// index of a shard (an entry may hold several writes, each of another key).
func HistoryKey(shard, index uint64, pos uint32) []byte {
	k := binary.BigEndian.AppendUint64(HistoryFloorKey(shard), index)
	return binary.BigEndian.AppendUint32(k, pos)
}

// AppendHistoryKey appends HistoryKey(shard, index, pos) to dst.
func AppendHistoryKey(dst []byte, shard, index uint64, pos uint32) []byte {
	dst = append(dst, prefixHistory)
	dst = binary.BigEndian.AppendUint64(dst, shard)
	dst = binary.BigEndian.AppendUint64(dst, index)
	return binary.BigEndian.AppendUint32(dst, pos)
}

// HistoryIndexStart is the smallest key of the events at index: the
// events of indexes [a, b) are [HistoryIndexStart(a), HistoryIndexStart(b)).
func HistoryIndexStart(shard, index uint64) []byte {
	return binary.BigEndian.AppendUint64(HistoryFloorKey(shard), index)
}

// HistorySpan returns [start, end) covering a shard's whole history, its
// floor record included.
func HistorySpan(shard uint64) (start, end []byte) {
	start = HistoryFloorKey(shard)
	return start, PrefixEnd(start)
}

// DecodeHistoryKey returns the log index and position of a HistoryKey.
func DecodeHistoryKey(key []byte) (index uint64, pos uint32, err error) {
	if len(key) != 21 || key[0] != prefixHistory {
		return 0, 0, fmt.Errorf("%w: history key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[9:17]), binary.BigEndian.Uint32(key[17:]), nil
}
