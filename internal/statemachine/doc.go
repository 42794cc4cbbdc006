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
// Concurrency: Begin, ApplyEntry, Commit and Reset must not run
// concurrently with each other (the replica calls them under its lock);
// Get only reads the engine and is safe to call from any goroutine.
//
// Dependencies: statemachine imports storage, shard and wire only; never
// raft, replica, kv or api.
package statemachine
