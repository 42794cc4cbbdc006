// Package etcdapi serves the etcd v3 gRPC API (the etcdserverpb services of
// etcd's published Go API module, go.etcd.io/etcd/api/v3) over Cairn's
// coordinator, so that etcdctl, programs using clientv3 and etcd's own
// benchmark tool talk to Cairn unchanged.
//
// What a call means in Cairn (docs/etcd-api.md says it for users):
//   - A key's mod_revision is its Cairn version: the Raft log index, in the
//     key's shard, of the write that produced the value. Revisions are
//     per shard: monotonic per key and per shard, not one cluster-wide
//     order. A response header's revision is the highest mod_revision the
//     call wrote or read (the written index for a write).
//   - Cairn records neither a key's creation revision nor its number of
//     modifications: create_revision is reported equal to mod_revision and
//     version as 1 for every existing key. Compares on them are accepted
//     only where they are exact: version or create_revision compared with
//     0 (does the key exist).
//   - A Txn's compares and writes must all be on one key: the Txn reads
//     the key, evaluates the compares, and writes with a condition on the
//     version it read (Cairn's If-Match), retrying from the read when
//     another write came first; so it is atomic. Other Txns answer
//     FailedPrecondition naming the limitation.
//   - Watch reads the shards' change histories (internal/statemachine
//     history.go) from this node's replicas: watch.go.
//   - Leases are records in Cairn's reserved key space, expired by the
//     leader of their shard on its replicated shard clock:
//     lease*.go.
//   - Auth and the maintenance calls Cairn has no counterpart for answer
//     Unimplemented.
//
// Dependencies: the coordinator (internal/kv) through the Backend
// interface, gRPC and etcd's API module; never a node's internals.
package etcdapi
