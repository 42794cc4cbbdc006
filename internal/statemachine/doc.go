// Package statemachine is the replicated state machine of one shard
// replica: it applies committed write commands to the node's storage
// engine deterministically, remembers their results by request id (the
// dedup table) so a retried write applies at most once, and keeps the
// in-memory helpers of both (the dedup index with its Bloom filters, and a
// cache of recently written keys' versions).
//
// A Machine is built over a storage engine and a shard id and token range;
// it needs no Raft node, so tests drive it with entries directly. The
// replica owns one and, for each Ready, applies the committed entries:
//
//	rd := m.Begin(waiting)           // waiting: does this replica answer a request id
//	m.ApplyEntry(rd, index, data)    // each normal entry, in log order
//	rd.Set(appliedKey, appliedState) // the replica's own bookkeeping
//	m.Commit(rd)                     // one unsynced batch
//	rd.Applied()                     // the results, to answer proposals
//
// After a snapshot replaced the shard's state in the engine, Reset reloads
// the in-memory state. Get serves serializable reads of the applied state.
//
// Indexes. A write also maintains, in the same batch, the node-global
// derived indexes of its object — the key order and the secondary-index
// entries of its terms — which storage can rebuild from the data alone
// (index.go, docs/indexes.md).
//
// History. A replica also keeps its shard's recent changes (history.go):
// each put, and each delete of an existing key, writes an event with the
// value it replaced, in the same batch; the events of the last
// HistoryRetention log indexes stay. The etcd API's watches read them
// (Events), so a watch resumes from any revision still held, on any
// replica. A delete's version is its own log index.
//
// Deduplication. A write's record holds its request id, the fingerprint
// of its command (operation, condition, version, key, value, index
// terms) and its result. A retry — same id, same fingerprint — gets the recorded result
// and applies nothing; another command under a used id gets
// wire.StatusRequestIDReused (HTTP 409) and applies nothing either.
//
// Expiry and the shard clock. Records expire by a replicated shard clock,
// never by any node's wall clock. A leader stamps each entry it proposes
// with a reading of its monotonic clock; applying a stamped entry advances
// the shard clock by the time since the previous stamp of the same term
// (the same leader), at most MaxClockStep (DedupTTL/8); a term's first
// stamp only sets its base, and unstamped entries (forwarded by followers)
// leave the clock alone. A leader whose table holds records and that
// stamped nothing for StampInterval (DedupTTL/16) proposes an entry that
// only stamps. Records sit in buckets of DedupTTL/4 of shard clock; a
// bucket is dropped once the shard clock is DedupTTL past its end.
//
// What holds:
//   - The shard clock runs no faster than real time. The stamps of one
//     term come from one process's monotonic clock, and the committed
//     stamps of a term were made before the next term's leader was
//     elected, so the intervals counted never overlap. A wall clock that
//     is minutes ahead, or jumps a year, changes nothing; a monotonic
//     reading that jumps moves the clock by one MaxClockStep.
//   - So a record is kept at least MinRetention (DedupTTL - MaxClockStep,
//     105 s of the default 2 minutes) of real time after its write's
//     first attempt: the only time before the write that the clock can
//     count after it is one clamped step (a stamp after a quiet spell). A
//     retry whose proposal reaches the leader within that time gets the
//     first answer. internal/kv retries a write at most 30 s
//     (kv.MaxRetryWindow) and the Go client 30 s (client.MaxWriteRetryWindow),
//     leaving 45 s for slow messages.
//   - The table is bounded: while it holds records the leader keeps the
//     clock moving at about real time, so it holds the writes of the last
//     1.25 DedupTTL or so of leadership (plus the time lost in elections).
//     Expiry by a count of entries would bound it too, but would not keep
//     the retry guarantee under heavy load.
//
// Concurrency: Begin, ApplyEntry, Commit and Reset must not run
// concurrently with each other (the replica calls them under its lock);
// Get only reads the engine and is safe to call from any goroutine.
//
// Dependencies: statemachine imports storage, shard and wire only; never
// raft, replica, kv or api.
package statemachine
