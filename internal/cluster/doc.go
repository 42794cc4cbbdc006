// Package cluster holds a Cairn cluster's membership and its balancer.
//
// # Membership
//
// The membership record (Record) lists every node that ever belonged to
// the cluster: its id, HTTP and peer addresses and state (active,
// decommissioning, removed, dead), plus the cluster-wide settings changed
// at run time. It is replicated through Cairn itself: a JSON document under
// the reserved key RecordKey, read linearizably and written with
// compare-and-set on its version (If-Match), so it lives in whichever shard
// the key hashes to, with no state-machine code of its own. Keys beginning
// with byte 0x00 are reserved: the HTTP API refuses them.
//
// Node ids are never reused: a removed or dead node stays in the record
// forever, and a join under its id is refused (ErrRemoved). A join under
// an active id with other addresses is refused too (ErrIDInUse); with the
// same addresses it is an idempotent retry. Neither a join nor a node
// telling its addresses at start (Record.SetAddrs) may take an address
// another member not gone uses (ErrAddrInUse).
//
// The Manager applies the record's pure transitions (Record.Join,
// Record.Decommission, …) through a read–modify–CAS loop over the KV
// interface (the node's coordinator) and keeps the last record read, which
// a node polls about every second (Manager.Run) to learn its peers'
// addresses.
//
// # Balancer
//
// The Balancer runs on every node but acts only on the one that leads
// shard 1. Each round it reads the record, probes the members' liveness
// (declaring dead a member silent for DeadNodeTimeout), asks the pure
// planner (Plan) for replica moves and runs them through the Mover (the
// store), at most TransferLimit at once touching any node. The planner
// first restores the replication factor of shards with replicas on dead,
// removed or decommissioning nodes, then evens out replica counts across
// active nodes. A decommissioning node left with no replica is marked
// removed — once the members' reports of their replicas confirm it on a
// view of the shards that owns the whole key space (decommission.go: a
// split's new half starts on its parent's replicas, and the balancing
// node may not know it yet).
//
// Every exported method of Manager and Balancer is safe for concurrent
// use; Plan and the Record methods are pure.
package cluster
