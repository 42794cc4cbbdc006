package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// Config of one replica.
type Config struct {
	NodeID uint64
	Desc   shard.Descriptor
	Engine *storage.Engine
	// Send transmits messages of this shard to other nodes. It must not
	// block for long (queue and return).
	Send func(shardID uint64, msgs []raftpb.Message)
	// Enqueue asks the scheduler to run Process soon.
	Enqueue func(shardID uint64)
	// ElectionTick and HeartbeatTick in ticks. Defaults 10 and 1.
	ElectionTick, HeartbeatTick int
	// MaxPending bounds queued proposals plus reads. Default 4096.
	MaxPending int
	// TruncateThreshold: truncate the log when more than this many applied
	// entries are kept. Default 10000.
	TruncateThreshold uint64
	// TruncateBytes: truncate the log once this many bytes of entries were
	// appended since the last truncation. Truncating before the engine
	// flushes its memtable lets the dead entries vanish there instead of
	// being written to tables and compacted. Default 1 MiB.
	TruncateBytes uint64
	// CutPastDown: a leader cuts its log past followers that are not
	// recently active or whose progress it has not learnt (they catch up
	// by snapshot), as it does past any follower once 64 × TruncateBytes
	// have piled up. Off by default: a node restarted after a crash then
	// catches up from the log. Tests of the snapshot path turn it on.
	CutPastDown bool
	// TruncateKeep: entries kept below the applied index after a
	// truncation, for followers that are a little behind. A leader also
	// keeps what its active followers have not acknowledged yet. Default
	// 100.
	TruncateKeep uint64
	// DedupTTL: how long a request id is remembered (see
	// statemachine.Config). Default statemachine.DefaultDedupTTL.
	DedupTTL time.Duration
	// VersionCache: keys whose current version the replica keeps in
	// memory, so writes to them skip a read. Default 4096; negative: none.
	VersionCache int
	// HistoryRetention: log indexes of change history the shard keeps for
	// etcd watches (statemachine.Config.HistoryRetention); the same on
	// every node. Default statemachine.DefaultHistoryRetention; negative:
	// none.
	HistoryRetention int
	// HistoryBytes bounds that history in bytes too
	// (statemachine.Config.HistoryBytes); the same on every node.
	// Default statemachine.DefaultHistoryBytes; negative: no bound but
	// HistoryRetention.
	HistoryBytes int64
	// Clock is the monotonic clock a leader stamps its entries with (the
	// shard clock that ages dedup records counts the time between a
	// leader's stamps; see internal/statemachine). Default: time since the
	// process started, on Go's monotonic clock. Wall clock changes do not
	// affect it.
	Clock func() time.Duration
	// LeaseDuration, when positive, lets a leader answer linearizable
	// reads without a quorum round for that long after the start of one
	// that succeeded (lease.go); it must be shorter than the time a
	// follower that heard from the leader refuses votes, in the leader's
	// clock. The store sets it from its tick and election timeout. 0: every
	// read confirms leadership with a quorum.
	LeaseDuration time.Duration
	// PeersLease: the shard's other replicas may hold leader leases even
	// when this one does not (LeaseDuration 0: its node's --lease-reads
	// may differ from theirs, as during a rolling change of the flag).
	// With it, or a positive LeaseDuration, a restarted replica drops
	// vote requests for its first election timeout (refusesVotesLocked).
	// The store always sets it.
	PeersLease bool
	// Created: the replica's state was written just now, by a split of
	// the shard it comes from; it has never answered a leader of its
	// own shard, so it needs no pause before voting (refusesVotesLocked)
	// and the leader campaigning for the new half at once wins at once.
	Created bool
	// LeaseClock is the monotonic clock the lease is measured with.
	// Default: Go's monotonic clock (never the fault-injected Clock: a
	// clock that can be moved back would stretch a lease).
	LeaseClock func() time.Duration
	// LeaseReads, if set, counts the reads (this node's and its
	// followers' read index requests) a leader answered under its lease
	// (shared by all replicas of a node).
	LeaseReads *atomic.Uint64
	Logger     *slog.Logger
	// LeaderApplied, if set, counts the write commands this node applied
	// while leading their shard (shared by all replicas of a node).
	LeaderApplied *atomic.Uint64
	// PendingWrites, if set, counts the proposals waiting for their
	// answer (shared by all replicas of a node).
	PendingWrites *atomic.Int64
	// OnRemoved, if set, is called once when the replica applies a conf
	// change that removes this node from the shard (with the descriptor
	// that no longer lists it). It runs on the worker applying the entry,
	// under the replica's lock: it must only queue the removal.
	OnRemoved func(d shard.Descriptor)
	// OnScrub, if set, is called when the replica applies a scrub entry
	// (docs/scrub.md): with the entry's id and index, the shard's token
	// range then, and an engine snapshot holding the data at exactly
	// that index, which the callee must Close. It runs under the
	// replica's lock: it must only queue the work.
	OnScrub func(shardID, id, index, start, end uint64, snap *storage.Snapshot)
	// OnSplit, if set, is called when the replica has applied a split
	// (split.go), with the new shard's descriptor, once the new shard's
	// initial state is in the engine; leader: this replica led the shard
	// then. It runs on the worker applying the entry, under the replica's
	// lock: it may open the new replica but must not wait on this one.
	OnSplit func(child shard.Descriptor, leader bool)
	// OnRangeChange, if set, is called when the replica's token range
	// changes (a split, or a snapshot that carried one). It must not
	// block.
	OnRangeChange func()
}

// EnsureDefaults returns c with its zero tuning fields set to their
// defaults (the identity fields — NodeID, Desc, Engine, Send, Enqueue —
// have none).
func (c Config) EnsureDefaults() Config {
	if c.ElectionTick == 0 {
		c.ElectionTick = 10
	}
	if c.HeartbeatTick == 0 {
		c.HeartbeatTick = 1
	}
	if c.MaxPending == 0 {
		c.MaxPending = 4096
	}
	if c.TruncateThreshold == 0 {
		c.TruncateThreshold = 10000
	}
	if c.TruncateBytes == 0 {
		c.TruncateBytes = 1 << 20
	}
	if c.TruncateKeep == 0 {
		c.TruncateKeep = 100
	}
	if c.DedupTTL == 0 {
		c.DedupTTL = statemachine.DefaultDedupTTL
	}
	if c.Clock == nil {
		c.Clock = sinceStart
	}
	if c.LeaseClock == nil {
		c.LeaseClock = sinceStart
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first field of a filled Config out of range.
func (c Config) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("replica: Config.NodeID is required")
	case c.Desc.ID == 0:
		return errors.New("replica: Config.Desc names no shard")
	case !c.Desc.HasReplica(c.NodeID):
		return fmt.Errorf("replica: node %d is not a replica of shard %d (%v)", c.NodeID, c.Desc.ID, c.Desc.Replicas)
	case c.Engine == nil:
		return errors.New("replica: Config.Engine is required")
	case c.HeartbeatTick <= 0 || c.ElectionTick <= c.HeartbeatTick:
		return fmt.Errorf("replica: ElectionTick %d and HeartbeatTick %d: want 0 < heartbeat < election", c.ElectionTick, c.HeartbeatTick)
	case c.MaxPending < 0:
		return fmt.Errorf("replica: MaxPending %d: want a positive bound", c.MaxPending)
	case c.DedupTTL < 0:
		return fmt.Errorf("replica: DedupTTL %s: want a positive duration", c.DedupTTL)
	}
	return nil
}

// processStart anchors the default Clock.
var processStart = time.Now()

func sinceStart() time.Duration { return time.Since(processStart) }
