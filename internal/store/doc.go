// Package store runs every replica of one node: it opens them, drives their
// Ready loops from a fixed pool of workers (a scheduler with a queue of
// shard ids, each shard queued at most once), ticks them, routes incoming
// raft messages to them, sends their outgoing messages (snapshots on a
// separate, bounded path) and moves leadership back to each shard's
// preferred node once it has caught up.
//
// Every message from a peer is checked against the shard descriptors
// before it reaches a replica (validate.go): a message for a shard this
// node does not hold, from a node that is not a replica of the shard, not
// addressed to this node, of a type no peer sends, with terms or indexes
// out of bounds, entries out of sequence, conf changes (Cairn makes none
// yet), a conf state raft cannot restore, or a forwarded proposal writing
// a key outside the shard, is dropped and counted by reason (Dropped).
//
// Goroutines (all started by Start, stopped by Stop):
//   - Workers × worker: pops a shard id, runs its replica's Process;
//   - ticker: every TickInterval ticks every replica;
//   - balancer: every BalanceInterval checks leader placement;
//   - snapshot senders: one per in-flight snapshot, at most MaxSnapshots;
//     each streams from an engine snapshot pinned when raft asked for it.
package store
