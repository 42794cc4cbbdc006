// Package transport moves Raft messages and forwarded client requests
// between nodes. Transport is the interface the store uses; GRPC is the real
// implementation and Network/Mem is the in-memory one for tests, with
// partitions.
//
// GRPC serves two protocols on the one peer port. Raft messages travel on
// the raft stream: one plain connection per peer (TCP, or the same mutual
// TLS as the rest), opened by the sender, which is the only side that
// writes. gRPC carries what needs an answer or flow control: a unary RPC
// for forwarded requests and a client stream for snapshots. The accept
// loop (mux.go) does the TLS handshake, then reads a connection's first
// 8 bytes: the raft stream's magic "CAIRNRF1" keeps it as a raft stream,
// anything else (HTTP/2's client preface) goes to the gRPC server with
// those bytes put back. Nodes of earlier versions send raft batches on
// the gRPC stream /cairn.Peer/Raft, which the server still accepts, and
// take them only there: such a peer greets a raft stream as an HTTP/2
// server and closes it, and the sender then sends to it on that gRPC
// stream until the stream fails (legacy.go), so a cluster can be upgraded
// node by node.
//
// # Raft stream
//
// After the magic, each frame is a 4-byte big-endian length and an
// EncodeBatch of that many bytes, at most maxFrame (64 MiB); messages of
// all shards share it. One sender goroutine per peer (rawLoop) waits on
// the peer's queue, takes everything queued (up to 4096 envelopes),
// encodes it into frames of about 4 MiB at most and writes them with one
// call straight to the connection: no goroutine between it and the
// socket. On the receiving node the connection's own goroutine reads each
// frame and calls Handler.HandleRaft. A second goroutine per outgoing
// connection only waits for it to end (the peer closed it or it broke) so
// that the next batch reconnects at once. A failed connect or handshake
// waits a backoff (50 ms growing 1.6x to 1 s, with jitter) before the
// next; meanwhile batches are dropped and reported. A write blocked 10 s
// breaks the connection. Outgoing connections leave from the node's own
// peer address (dialFrom), so partitions between node addresses cut
// them.
//
// Send never blocks the caller: messages go into a bounded per-peer queue
// and are dropped when it is full (Raft retransmits). The queue is bounded
// in batches (Config.QueueLen, 1024) and in bytes (Config.QueueBytes,
// 128 MiB): the encoded size of what Send accepted for the peer and its
// sender has not yet written or dropped, so a peer that stopped reading
// holds at most that much of the node's memory (plus the frames being
// written, a copy of part of it), whatever the entries' sizes. A batch
// larger than the bound still goes when nothing else is pending for the
// peer: else an entry that large could never reach a follower. Drops are
// counted (Stats.QueueDrops), and failures are reported through
// Config.Unreachable so raft can back off.
//
// # Trust
//
// Until peers authenticate with mutual TLS, anything may arrive on the peer
// port. The server never trusts it: a frame that does not decode, or whose
// length is over maxFrame, closes its stream (Stats.BadFrames); neither a
// frame's length nor a batch header can make it allocate more than the
// bytes that really arrived (a frame's buffer grows as they come); and a
// handler panic is recovered and closes the stream (Stats.Panics) — a last line of defence, since the Handler (the store)
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
// (ResourceExhausted) and cuts one beyond Config.MaxSnapshotBytes. With
// Config.DiskFree it keeps the node's disk reserve (Config.DiskReserve):
// it refuses a stream at its start while the free space is below the
// reserve, and cuts one as a chunk arrives whose spilling would take the
// free space below it (both ResourceExhausted, ErrDiskReserve) — the
// header carries no size, so the free space is measured again for every
// chunk, before the handler spills it. A snapshot larger than the free
// space would otherwise fill the filesystem under the engine, and every
// shard of the node would fail its writes, not only the one receiving.
// The sender reports the refusal to raft as a failed snapshot, and raft
// tries again a heartbeat later. The server ends a stream whose next
// frame (the header, or any chunk) does not come within
// Config.SnapshotIdleTimeout (default 1 minute) with
// DeadlineExceeded, its data discarded as below: a sender that paused,
// hung or was cut off without its connection closing would otherwise keep
// one of those places for good, and no other snapshot would come in. The
// wait starts when the handler asks for the frame, so a slow disk on the
// receiving side never counts against the sender; the sender's pacing
// (SetSnapshotRate) holds a chunk at most 30 s, half the default bound.
// The handler (replica.ReceiveSnapshot) writes the records, as they arrive,
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
// send no raft message, forwarded request or snapshot (tls.go). The
// accept loop does the server's handshake (within 10 s) for raft streams
// and gRPC alike, offering "h2" by ALPN as gRPC clients require. Failed
// handshakes are counted in Stats and logged at most once per 10 s.
package transport
