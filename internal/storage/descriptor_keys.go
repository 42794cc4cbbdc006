package storage

import "encoding/binary"

// suffixDescriptor is the suffix of a shard's descriptor record.
const suffixDescriptor = 'D'

// DescriptorKey is the key of a replica's current shard descriptor (its
// members and epoch), written in the same batch as the applied state of
// the conf change that produced it, and carried by snapshots.
func DescriptorKey(shard uint64) []byte { return localKey(shard, suffixDescriptor, 0) }

// suffixTombstone is the suffix of a removed replica's tombstone.
const suffixTombstone = 'X'

// TombstoneKey is the key of the tombstone a node keeps for a shard whose
// local replica was removed: it outlives the shard's other local keys
// (it sorts inside ShardLocalSpan, so it is written after that span is
// deleted) and makes late messages for the shard be refused.
func TombstoneKey(shard uint64) []byte { return localKey(shard, suffixTombstone, 0) }

// LocalShards lists the shards that have any shard-local key in the
// engine (replica state or a tombstone), ascending: one seek per shard.
func LocalShards(e *Engine) ([]uint64, error) {
	it, err := e.NewIter([]byte{prefixLocal}, []byte{prefixLocal + 1})
	if err != nil {
		return nil, err
	}
	var out []uint64
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 9 {
			ok = it.Next()
			continue
		}
		id := binary.BigEndian.Uint64(k[1:9])
		out = append(out, id)
		if id == ^uint64(0) {
			break
		}
		next := make([]byte, 9)
		next[0] = prefixLocal
		binary.BigEndian.PutUint64(next[1:], id+1)
		ok = it.SeekGE(next)
	}
	return out, it.Close()
}
