// Package replica runs one shard replica: a raft.RawNode, its raftlog.Log,
// its state machine (internal/statemachine: apply, deduplication, version
// cache), and the waiters of proposals and reads.
//
// The Ready contract. For each Ready of the RawNode, Process does, in order:
//
//  1. persist the snapshot (its data, applied state and log position), the
//     new entries and the HardState in one storage batch, fsync'd iff
//     rd.MustSync (always when a snapshot is present);
//  2. send rd.Messages — after the write, so every vote and append
//     acknowledgement refers to durable state; a leader sends before its
//     own write instead, so its fsync overlaps the followers' (an entry
//     commits only once a majority has it durably, and the leader counts
//     itself only after its own write);
//  3. apply the committed entries in one batch committed without fsync (the
//     applied index is in the same batch, and the durable log replays
//     anything lost in a crash), calling ApplyConfChange for every conf
//     change; then resolve waiting proposals and reads;
//  4. Advance.
//
// A leader stamps the entries it proposes with its monotonic clock
// (Config.Clock), which ages dedup records (see internal/statemachine); it
// proposes a stamp of its own when its proposals did not stamp for a while
// and records wait to expire.
//
// Process runs the contract in two halves, Stage (drain the inbox, take the
// Ready, stage step 1 into a batch) and Finish (steps 2 to 4 once the batch
// has committed); a caller may share one batch among several shards.
//
// Snapshots. Raft's Storage.Snapshot pins an engine snapshot and returns
// only metadata and a header naming it (snapshot.go); the store streams
// its data with OpenSnapshot, outside the lock. A received snapshot is
// spilled to sstables by ReceiveSnapshot and installed in step 1 by one
// atomic ingestion (snapshot_recv.go). The protocol is described in
// package transport.
//
// Membership. A replica's descriptor (Desc: voters, learners, epoch)
// follows its applied conf state: every ConfChangeV2 it applies writes the
// next descriptor, epoch plus one, in the apply batch (descriptor.go), and
// snapshots carry it. A conf change raft's changer would refuse (and panic
// on) is skipped by every replica alike. A replica that applies a
// configuration without its node reports it once (Config.OnRemoved); the
// store deletes it. Create makes the empty replica a move adds as a
// learner; ProposeConfChange proposes a change on the leader, only on the
// descriptor epoch it was decided on.
//
// Peers are not trusted: before raft steps a message, admitLocked drops
// those naming log positions this replica cannot have (raft would panic
// on a heartbeat committing beyond its last index); the store has checked
// everything that needs no raft state.
//
// Concurrency. Other goroutines never touch the RawNode: Propose, Read,
// Step and Tick append to an inbox under a small mutex and ask the scheduler
// (Config.Enqueue) to run Process, which one worker at a time executes. The
// leader, term and applied index are published in atomics for routing.
package replica
