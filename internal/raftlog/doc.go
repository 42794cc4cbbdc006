// Package raftlog implements raft.Storage for one shard replica on top of the
// node's storage.Engine. The log, HardState, truncated state and applied
// state live under the shard's local key prefix (see package storage).
//
// Writes are staged into a caller's storage.Batch (so one Ready persists in
// one batch) and the in-memory view is updated by the returned commit hook
// only after that batch has committed: raft never sees state that is not yet
// in the engine.
//
// A Log is used by its replica's Ready loop (writes) and by raft itself
// (reads, under the replica's lock); its methods lock internally so the
// stats readers of other goroutines are safe too.
package raftlog
