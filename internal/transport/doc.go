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
package transport
