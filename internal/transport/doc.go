// Package transport moves Raft messages and forwarded client requests
// between nodes. Transport is the interface the store uses; GRPC is the real
// implementation (one long-lived client stream per peer carrying batches of
// messages of every shard, a unary RPC for forwarded requests, a client
// stream for snapshots) and Network/Mem is the in-memory one for tests, with
// partitions.
//
// Send never blocks the caller: messages go into a bounded per-peer queue
// and are dropped when it is full (Raft retransmits). Failures are reported
// through Config.Unreachable so raft can back off.
//
// # Trust
//
// Until peers authenticate with mutual TLS, anything may arrive on the peer
// port. The server never trusts it: a frame that does not decode closes its
// stream (Stats.BadFrames), a batch header cannot make it allocate more than
// the frame holds, and a handler panic is recovered and closes the stream
// (Stats.Panics) — a last line of defence, since the Handler (the store)
// checks every message against its shard descriptors before raft sees it
// and drops what does not belong (see store.HandleRaft).
//
// # Snapshot protocol
//
// Raft's MsgSnap never carries the shard's data. On the leader, raft's
// Storage.Snapshot only pins a consistent engine snapshot (under the
// replica lock, which is cheap) whose applied state is the snapshot's
// index, term and conf state; the message's Data is a 10-byte header naming
// that pinned snapshot. The store's snapshot sender (at most MaxSnapshots
// at once) opens it and calls SendSnapshot, which streams on
// /cairn.Peer/Snapshot:
//
//  1. one header frame: an EncodeBatch of the one MsgSnap envelope, with
//     Snapshot.Data emptied (metadata only);
//  2. data frames, each a run of whole records — uvarint key length, key,
//     uvarint value length, value — in strictly increasing key order over
//     the shard's dedup table then its data range, about 1 MiB each (a
//     record larger than that travels alone). The source reads them from
//     the pinned snapshot one chunk at a time, outside every lock; gRPC's
//     flow control blocks the sender while the receiver is behind;
//  3. the client closes its side; the server answers one empty frame once
//     the handler returned, or fails the stream. The sender reports the
//     outcome to raft (ReportSnapshot).
//
// The server refuses a stream beyond Config.MaxIncomingSnapshots at once
// (ResourceExhausted) and cuts one beyond Config.MaxSnapshotBytes. The
// handler (replica.ReceiveSnapshot) writes the records, as they arrive,
// into sstables in the engine's staging folder, checking order and that
// every key is inside the shard; on any error or a stream that ends early
// it removes them and nothing changes. Only once the whole stream arrived
// does the MsgSnap (with a local header naming the staged files) go to
// raft; if raft accepts it, the replica ingests the staged sstables
// together with small ones holding its applied state, HardState, truncated
// state and the removal of its raft log, in one atomic ingestion: after a
// crash the shard is wholly at the snapshot or wholly at its old state.
// Staged files left by a crash are removed when the engine opens.
//
// # TLS
//
// With Config.ServerTLS and Config.ClientTLS (internal/security.PeerTLS)
// the peer port speaks mutual TLS: every connection, both ways, presents
// a node certificate the cluster CA signed, so a process without one can
// send no raft message, forwarded request or snapshot (tls.go). Failed
// handshakes are counted in Stats and logged at most once per 10 s.
package transport
