package kv

import (
	"errors"
	"time"

	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/wire"
)

// Sentinel errors returned by the Coordinator. They are always wrapped with
// %w; callers test them with errors.Is. Only internal/api/http turns them
// into status codes.
var (
	// ErrNotFound: the key is absent (never written or deleted). HTTP 404.
	ErrNotFound = errors.New("kv: key not found")
	// ErrPreconditionFailed: an If-Match / If-None-Match condition did not
	// hold; nothing was written. HTTP 412.
	ErrPreconditionFailed = errors.New("kv: precondition failed")
	// ErrRequestIDReused: the write's request id names an earlier,
	// different write (another key, operation, value or condition); nothing
	// was written. HTTP 409.
	ErrRequestIDReused = errors.New("kv: request id reused by a different write")
	// ErrTimeout: the request deadline passed before the operation was known
	// to be done (for a write: it may still commit). HTTP 504.
	ErrTimeout = errors.New("kv: deadline exceeded")
	// ErrAckTimeout: the write committed (or the read was served) but fewer
	// than ACK replicas confirmed within the deadline. HTTP 504.
	ErrAckTimeout = errors.New("kv: fewer replicas than requested confirmed")
	// ErrOverloaded: a bounded queue is full. HTTP 503 with Retry-After.
	ErrOverloaded = errors.New("kv: overloaded")
	// ErrInvalidArgument: the request is malformed in a way only the
	// coordinator can see (for example FROM above the replication factor).
	// HTTP 400.
	ErrInvalidArgument = errors.New("kv: invalid argument")
	// ErrStopped: the node is shutting down. HTTP 503.
	ErrStopped = errors.New("kv: node stopping")
	// ErrNoLeader: this node's replica of the key's shard has known no
	// leader for an election timeout (replica.LeaderLost): the node is cut
	// off from the shard's other replicas, or the shard has lost its
	// quorum. Answered at once rather than at the deadline, so the client
	// can try another node. For a write the outcome is unknown, as for
	// ErrTimeout: an earlier attempt may have been proposed and may still
	// commit (a retry under the same request id applies it at most once).
	// HTTP 503 with Retry-After.
	ErrNoLeader = errors.New("kv: no leader")
	// ErrWrongShard: the node holding the shard refused the request
	// because its descriptor disagrees with this node's routing (the key
	// is outside the shard's range there, or the epoch differs): the
	// shard maps differ. Nothing was done; retrying the same route cannot
	// help until the maps agree. HTTP 503.
	ErrWrongShard = errors.New("kv: request routed to a shard that does not own the key")
)

// Consistency of a read.
type Consistency uint8

const (
	// Linearizable reads observe every write acknowledged before the read
	// started (Raft ReadIndex on the shard leader).
	Linearizable Consistency = iota
	// Serializable reads are served by one replica's applied state and may
	// be stale.
	Serializable
)

// Condition of a conditional write.
type Condition uint8

const (
	// CondNone: unconditional.
	CondNone Condition = iota
	// CondIfMatch: write only if the key exists with version Version
	// (HTTP If-Match: "<version>").
	CondIfMatch
	// CondIfAbsent: write only if the key does not exist
	// (HTTP If-None-Match: *).
	CondIfAbsent
)

// ReadOptions of Get.
type ReadOptions struct {
	Consistency Consistency
	// Ack and From are the v0 replicas=ACK/FROM setting; zero means the
	// default (majority of RF / RF). See README "replicas".
	Ack, From int
}

// WriteOptions of Put and Delete.
type WriteOptions struct {
	// Ack and From as in ReadOptions.
	Ack, From int
	Cond      Condition
	// Version is compared when Cond is CondIfMatch.
	Version uint64
	// RequestID identifies the write across retries (up to 32 bytes). A
	// write retried with the same id is applied at most once; the retry
	// gets the first attempt's result. The key's shard remembers the id at
	// least statemachine.MinRetention (105 s by default) after the first
	// attempt; another write (other key, operation, value or condition)
	// under an id the shard remembers fails with ErrRequestIDReused and
	// writes nothing. Empty: the coordinator makes one.
	RequestID []byte
	// Index: a put's secondary-index terms (wire.ParseIndexTerm), which
	// replace the object's earlier ones; none removes them. Copies of a
	// term count once; the distinct terms are bounded by wire.MaxIndexTerms
	// and wire.MaxIndexBytes (ErrInvalidArgument).
	Index []wire.IndexTerm
}

// Value is a stored value and its version (the Raft log index of the write
// that produced it; shown to HTTP clients as the ETag).
type Value struct {
	Data    []byte
	Version uint64
	// Revision: the shard's applied index when the read was served (0
	// when unknown: an older node answered). Every later change of the
	// key has a higher version, so a watch from Revision+1 misses none;
	// it is set on ErrNotFound too.
	Revision uint64
	// Index: the object's secondary-index terms.
	Index []wire.IndexTerm
}

// NodeStatus is what GET /v1/status reports about one node.
type NodeStatus struct {
	NodeID      uint64        `json:"node_id"`
	HTTPAddr    string        `json:"http_addr"`
	PeerAddr    string        `json:"peer_addr"`
	Replicas    int           `json:"replicas"`
	Leaders     int           `json:"leaders"`
	Replication int           `json:"replication"`
	ShardCount  int           `json:"shards"`
	Uptime      time.Duration `json:"-"`
	UptimeSec   float64       `json:"uptime_seconds"`
	Version     string        `json:"version"`
	// Disk is the node's disk guard's last finding (nil: no guard).
	Disk *DiskState `json:"disk,omitempty"`
}

// MemberInfo describes one cluster member.
type MemberInfo struct {
	NodeID    uint64 `json:"node_id"`
	PeerAddr  string `json:"peer_addr"`
	HTTPAddr  string `json:"http_addr,omitempty"`
	Reachable bool   `json:"reachable"`
	// State is the member's state in the membership record (active,
	// decommissioning); empty before the node has read the record.
	State string `json:"state,omitempty"`
	// Role: read-replica for a read replica (empty: voter).
	Role string `json:"role,omitempty"`
	// MaxLag: the largest lag of the answering node's learners, in
	// entries (replica_lag.go); only on the answering node's own entry,
	// when it holds learners.
	MaxLag *uint64 `json:"max_lag,omitempty"`
}

// ShardInfo describes one shard as seen by the answering node.
type ShardInfo struct {
	ID         uint64   `json:"id"`
	TokenStart string   `json:"token_start"` // hex, inclusive
	TokenEnd   string   `json:"token_end"`   // hex, exclusive; "10000000000000000" = 2^64
	Epoch      uint64   `json:"epoch"`
	Replicas   []uint64 `json:"replicas"`           // voters
	Learners   []uint64 `json:"learners,omitempty"` // non-voting replicas
	Leader     uint64   `json:"leader"`             // 0 when unknown
	Term       uint64   `json:"term,omitempty"`
	Applied    uint64   `json:"applied,omitempty"` // local replica's applied index
	Commit     uint64   `json:"commit,omitempty"`
	// Scrub is the local replica's last scrub (docs/scrub.md); Verified
	// false: its data was on disk while the node was down and no scrub
	// has compared it yet (it serves no reads).
	Scrub    *store.ShardScrub `json:"scrub,omitempty"`
	Verified *bool             `json:"verified,omitempty"`
	// Lag: when the answering node's replica is a learner, the entries
	// its applied index is behind its leader's (replica_lag.go).
	Lag *uint64 `json:"lag,omitempty"`
	// LearnerLag: when the answering node leads the shard, the committed
	// entries each learner lacks (node id -> entries), as the leader sees
	// its progress.
	LearnerLag map[uint64]uint64 `json:"learner_lag,omitempty"`
}

// ClusterInfo is what GET /v1/cluster reports.
type ClusterInfo struct {
	NodeID      uint64       `json:"node_id"` // the answering node
	Replication int          `json:"replication"`
	Members     []MemberInfo `json:"members"`
	Shards      []ShardInfo  `json:"shards"`
	// Scrub counts the answering node's scrubs (docs/scrub.md).
	Scrub store.ScrubStats `json:"scrub"`
}

// ShardHash fingerprints one local replica's data (see Replica.Hash).
type ShardHash struct {
	Shard   uint64 `json:"shard"`
	Applied uint64 `json:"applied"`
	Hash    string `json:"hash"`
}
