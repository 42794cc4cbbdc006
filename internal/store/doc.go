// Package store runs every replica of one node: it opens them, drives their
// Ready loops from a fixed pool of workers (a scheduler with a queue of
// shard ids, each shard queued at most once), ticks them, routes incoming
// raft messages to them, sends their outgoing messages (snapshots on a
// separate, bounded path) and moves leadership back to each shard's
// preferred node once it has caught up.
//
// Goroutines (all started by Start, stopped by Stop):
//   - Workers × worker: pops a shard id, runs its replica's Process;
//   - ticker: every TickInterval ticks every replica;
//   - balancer: every BalanceInterval checks leader placement;
//   - snapshot senders: one per in-flight snapshot, at most MaxSnapshots.
package store
