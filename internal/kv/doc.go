// Package kv is the coordinator: it turns a client operation into work on
// the shard that owns the key. It hashes the key, finds the shard, and runs
// the operation on the shard leader — locally when this node holds the
// leader (no network hop), otherwise by forwarding it over the transport —
// following NotLeader hints and retrying through elections until the
// request's deadline — or, when this node's own replica of the shard has
// been without a leader for an election timeout (the node is cut off, or
// the shard has no quorum), answering ErrNoLeader at once, so the client
// can try another node. Serializable reads are served by the local
// replica.
//
// Listings and index queries are coverage queries: one replica of every
// shard, as few nodes as possible, each scanning its node-global ordered
// index once; the coordinator merges the answers in order (scan.go).
//
// Writes carry a request id; the shard's state machine remembers applied ids,
// so a write retried after a leader change applies at most once and the
// retry returns the first attempt's result.
//
// A Coordinator is safe for concurrent use.
package kv
