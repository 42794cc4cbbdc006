// Package storage is Cairn's only importer of Pebble. One Engine (one Pebble
// DB) per node holds, under distinct key prefixes, every local replica's Raft
// log, HardState, applied state, request-dedup table and the user data.
//
// Key layout (all integers big-endian so keys sort numerically):
//
//	0x00 "meta/" name                 node metadata (identity, shard map)
//	0x01 shard(8) 'h'                 raft HardState
//	0x01 shard(8) 'a'                 applied state (index, term, conf state)
//	0x01 shard(8) 't'                 truncated state (index, term)
//	0x01 shard(8) 'l' index(8)        raft log entry
//	0x01 shard(8) 'g'                 the shard clock (internal/statemachine):
//	                                  the replicated time dedup expiry runs on
//	0x01 shard(8) 'g' bucket(8) index(8)  dedup group: the request ids,
//	                                  fingerprints and results of an entry's
//	                                  writes whose shard-clock time is in the
//	                                  bucket
//	0x02 token(8) user-key            user value: version(8) | value bytes;
//	                                  with the version's top bit set, index
//	                                  metadata between them (index_keys.go)
//	0x04 user-key                     key order -> token(8) (derived)
//	0x05 index 0x00 term' user-key    secondary index -> token(8) (derived)
//	0x00 "meta/derived-pending/" range  a derived-index rebuild to finish
//	0x06 shard(8)                     history floor: the highest log index
//	                                  whose change events are gone
//	0x06 shard(8) 0x00                the history's bytes, counted in
//	                                  windows of log indexes
//	0x06 shard(8) index(8) pos(4)     change event of the pos-th write of
//	                                  the entry at index: kind, key, value,
//	                                  the version and value it replaced
//	                                  (internal/statemachine/history.go);
//	                                  the last 20,000 log indexes are kept
//	                                  by default, at most 64 MiB; watches
//	                                  read them
//
// The 0x06 history is a shard's replicated state, like its data: written
// in the apply batch of the writes it records, carried by snapshots.
//
// The 0x04 and 0x05 entries are derived from the data: written in the
// apply batch with it, rebuilt from it after a snapshot's ingestion or a
// crash (derived.go, docs/indexes.md).
//
// User data is keyed by token (xxhash64 of the key) first, so a shard's token
// range [start, end) is one contiguous Pebble key range: snapshots and hashes
// iterate it directly, and a later range split moves no data.
//
// An Engine, its Batches and Snapshots are safe for concurrent use in the
// ways Pebble allows: an Engine by many goroutines, a Batch or Iter by one.
package storage
