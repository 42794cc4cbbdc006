// Package store runs every replica of one node: it opens them, drives their
// Ready loops from a fixed pool of workers (a scheduler with a queue of
// shard ids, each shard queued at most once), ticks them, routes incoming
// raft messages to them, sends their outgoing messages (snapshots on a
// separate, bounded path) and moves leadership back to each shard's
// preferred node once it has caught up.
//
// Every message from a peer is checked against the shard descriptors
// before it reaches a replica (validate.go): a message for a shard this
// node does not hold (or whose replica was removed: a tombstone), from a
// node that is not a replica of the shard (voter or learner, per the
// local replica's current descriptor), not addressed to this node, of a
// type no peer sends, with terms or indexes out of bounds, entries out of
// sequence, a conf change entry that is not a well-formed ConfChangeV2
// (V1 entries, undecodable ones, node 0, unknown change types or
// transitions; a well-formed one that does not fit the configuration is
// skipped at apply time by every replica alike), a conf state raft
// cannot restore (joint ones are fine), a conf change proposed by a peer,
// or a forwarded proposal writing a key outside the shard, is dropped and
// counted by reason (Dropped).
//
// Membership (descriptors.go, moves.go). The store keeps the live
// descriptor of every shard: its local replica's, which follows the conf
// changes it applies (the epoch grows by one with each), or the latest it
// learned. MoveReplica, AddReplica and RemoveReplica run on the shard's
// leader (forwarded there with wire.KindMembers), one step at a time,
// each decided from the applied configuration (nextStep), so an
// interrupted change resumes where it stopped. The destination of an
// addition first gets an empty replica (wire.KindCreateReplica). A
// replica that applies its own removal is stopped, taken out of the
// store, and its data and shard-local state deleted under a tombstone
// (the reaper).
//
// Goroutines (all started by Start, stopped by Stop):
//   - Workers × worker: pops a shard id, runs its replica's Process;
//   - ticker: every TickInterval ticks every replica;
//   - balancer: every BalanceInterval checks leader placement;
//   - reaper: removes the replicas that applied their own removal;
//   - orphans: every OrphanInterval, a replica long without a leader asks
//     its shard's members whether it was removed while away;
//   - snapshot senders: one per in-flight snapshot, at most MaxSnapshots;
//     each streams from an engine snapshot pinned when raft asked for it;
//   - with ScrubInterval (scrub.go, docs/scrub.md): the scrubber proposes
//     scrub entries (each interval on the shards this node leads, every 2 s
//     for unverified replicas) and verifies the sstable checksums; the
//     hasher hashes the engine snapshots replicas pinned at scrub entries,
//     one at a time; one comparer per hashed scrub asks the peers for
//     theirs (bounded by ScrubWait); one repair per shard found outside its
//     majority (bounded by 10 minutes).
//
// Scrubbing. A replica opened over data that was on disk while the node
// was down is unverified (replica.Verified) until a scrub agrees with its
// shard's majority; the coordinator serves no read from it meanwhile. A
// replica outside the majority replaces itself: removed, deleted, added
// back and filled by a snapshot (scrub_repair.go).
package store
