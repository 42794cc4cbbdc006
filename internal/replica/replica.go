package replica

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Errors returned by a Replica.
var (
	ErrNotLeader  = errors.New("replica: not leader")
	ErrOverloaded = errors.New("replica: too many pending requests")
	ErrStopped    = errors.New("replica: stopped")
	// ErrBadCommand: a proposed command does not decode.
	ErrBadCommand = errors.New("replica: bad command")
)

// NotLeaderError carries the leader hint (0 = unknown). It wraps ErrNotLeader.
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("replica: not leader (leader hint %d)", e.Leader)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

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
	// Clock is the monotonic clock a leader stamps its entries with (the
	// shard clock that ages dedup records counts the time between a
	// leader's stamps; see internal/statemachine). Default: time since the
	// process started, on Go's monotonic clock. Wall clock changes do not
	// affect it.
	Clock  func() time.Duration
	Logger *slog.Logger
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

// Replica is one shard replica.
type Replica struct {
	cfg Config
	id  uint64 // shard id
	log *raftlog.Log
	// sm applies the shard's writes; its Apply methods run under mu, Get
	// anywhere.
	sm *statemachine.Machine

	leader atomic.Uint64
	term   atomic.Uint64
	// readyNanos is an exponentially weighted mean of how long one Ready
	// takes to handle (persist, send, apply): the replica's health.
	readyNanos atomic.Int64
	applied    atomic.Uint64
	// appliedCh, when set, is closed at the next apply (AppliedChanged).
	appliedCh atomic.Pointer[chan struct{}]
	// stampAsked: StampClock asked for a stamp-only entry.
	stampAsked atomic.Bool
	stopped    atomic.Bool
	// lostCh is closed once the replica has known no leader for an
	// election timeout (LeaderLost), and replaced by an open one when it
	// finds a leader again (LeaderLostCh). Only the replica's round, under
	// mu, closes or replaces it.
	lostCh atomic.Pointer[chan struct{}]
	// desc is the current descriptor (descriptor.go); descCh is closed
	// and replaced whenever it changes. removed: a conf change removed
	// this node from the shard.
	desc    atomic.Pointer[shard.Descriptor]
	descCh  atomic.Pointer[chan struct{}]
	removed atomic.Bool
	// unverified: the replica's data is not known to agree with its
	// shard's (scrub.go); it serves no reads.
	unverified atomic.Bool
	// peer: snapshots in flight and refused messages (snapshot*.go).
	peer peerState

	in struct {
		sync.Mutex
		msgs     []raftpb.Message
		props    []*proposal
		reads    []*waiter
		ticks    int
		campaign bool
		reports  []func(*raft.RawNode)
		pending  int
	}

	// mu is held by Process; it guards the RawNode and the waiters.
	mu struct {
		sync.Mutex
		rn        *raft.RawNode
		appliedT  uint64
		cs        raftpb.ConfState
		props     map[string][]*proposal
		readBatch map[uint64]*readRound
		nextRead  uint64
		applyWait []*waiter
		// replWait: WaitReplicated calls (a leader's only).
		replWait []*replWaiter
		// seenLead and seenTerm: the leader and term last published;
		// every waiter is failed when either changes.
		seenLead, seenTerm uint64
		// lastStamp: the Clock reading of the last entry this replica
		// stamped as leader.
		lastStamp time.Duration
		// leaderless: the ticks this replica has spent without a
		// leader, in a row (0 while it knows one), counted once it has
		// known one (hadLeader) since it opened.
		leaderless int
		hadLeader  bool
		// durableTerm: the term of the last hard state persisted.
		durableTerm uint64
	}
}

// Open opens (bootstrapping if new and bootstrap is set) the replica.
func Open(cfg Config, bootstrap bool) (*Replica, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Replica{cfg: cfg, id: cfg.Desc.ID}
	lost := make(chan struct{})
	r.lostCh.Store(&lost)
	ok, err := raftlog.Exists(cfg.Engine, r.id)
	if err != nil {
		return nil, err
	}
	if !ok {
		if !bootstrap {
			return nil, fmt.Errorf("replica: shard %d has no state", r.id)
		}
		if err := raftlog.Bootstrap(cfg.Engine, r.id, cfg.Desc.Replicas); err != nil {
			return nil, err
		}
	}
	lg, as, err := raftlog.Open(cfg.Engine, r.id, r.snapshot)
	if err != nil {
		return nil, err
	}
	r.log = lg
	d, found, err := loadDescriptor(cfg.Engine, r.id)
	if err != nil {
		return nil, err
	}
	if !found {
		// A bootstrapped shard (or one from before descriptors were
		// persisted) starts from the descriptor it is given.
		d = cfg.Desc.Clone()
		b := cfg.Engine.NewBatch()
		b.Set(storage.DescriptorKey(r.id), d.Marshal())
		if err := b.Commit(true); err != nil {
			return nil, err
		}
	}
	r.setDesc(d)
	r.removed.Store(as.Index > 0 && len(as.ConfState.Voters) > 0 && !isMember(as.ConfState, cfg.NodeID))
	rc := &raft.Config{
		ID:                        cfg.NodeID,
		ElectionTick:              cfg.ElectionTick,
		HeartbeatTick:             cfg.HeartbeatTick,
		Storage:                   lg,
		Applied:                   as.Index,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		// Followers hand proposals to the leader inside the Raft stream
		// (ProposeForward); the leader-only paths check leadership
		// themselves before proposing.
		DisableProposalForwarding: false,
		Logger:                    newRaftLogger(cfg.Logger.With("shard", r.id)),
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("replica: shard %d: %w", r.id, err)
	}
	r.mu.rn = rn
	r.sm, err = statemachine.Open(statemachine.Config{
		ShardID: r.id, Start: d.Start, End: d.End, Engine: cfg.Engine,
		DedupTTL: cfg.DedupTTL, VersionCache: cfg.VersionCache, HistoryRetention: cfg.HistoryRetention,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	if err := r.sm.OpenHistory(as.Index); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	r.mu.appliedT = as.Term
	r.mu.cs = as.ConfState
	if hs, _, err := lg.InitialState(); err == nil {
		r.mu.durableTerm = hs.Term
	}
	r.mu.props = map[string][]*proposal{}
	r.mu.readBatch = map[uint64]*readRound{}
	r.mu.nextRead = rand.Uint64() >> 1
	r.applied.Store(as.Index)
	r.term.Store(rn.BasicStatus().Term)
	return r, nil
}

// ID is the shard id.
func (r *Replica) ID() uint64 { return r.id }

// Desc is the replica's current shard descriptor (see descriptor.go): the
// one it was created with until a conf change or a snapshot brings
// another. Callers must not modify its slices.
func (r *Replica) Desc() shard.Descriptor { return *r.desc.Load() }

// DescChanged returns a channel closed at the next change of Desc.
func (r *Replica) DescChanged() <-chan struct{} { return *r.descCh.Load() }

// Removed reports whether a conf change removed this node from the shard.
func (r *Replica) Removed() bool { return r.removed.Load() }

func (r *Replica) setDesc(d shard.Descriptor) {
	if old := r.desc.Load(); r.sm != nil && (old == nil || old.Start != d.Start || old.End != d.End) {
		r.sm.SetRange(d.Start, d.End)
		if f := r.cfg.OnRangeChange; f != nil {
			f()
		}
	}
	r.desc.Store(&d)
	ch := make(chan struct{})
	if old := r.descCh.Swap(&ch); old != nil {
		close(*old)
	}
}

// Leader is the last known leader (0 = unknown).
func (r *Replica) Leader() uint64 { return r.leader.Load() }

// IsLeader reports whether this replica is the leader.
func (r *Replica) IsLeader() bool { return r.leader.Load() == r.cfg.NodeID }

// LeaderLost reports whether this replica has known no leader for an
// election timeout (ElectionTick ticks in a row, the one it lost its
// leader at included): it cannot reach one. Through an ordinary election
// a replica is without a leader for a moment only (a follower forgets its
// leader when it starts an election itself, after an election timeout
// without hearing from it, or when another node's election reaches it,
// and learns the winner a round trip later). A follower cut off from its
// peers forgets its leader after an election timeout and finds none; a
// leader cut off from its followers steps down after one or two (raft's
// quorum check) and finds none. So a replica that reports this is cut
// off, or its shard has lost its quorum. A learner never campaigns and
// keeps its last leader: it never reports this. Nor does a replica that
// has known no leader since it opened (a node starting, a cluster
// forming): it may not have heard from its peers yet. Safe for concurrent
// use.
func (r *Replica) LeaderLost() bool {
	select {
	case <-*r.lostCh.Load():
		return true
	default:
		return false
	}
}

// LeaderLostCh returns a channel closed once LeaderLost is true (already
// closed if it is), so that a caller can end a wait when it becomes so.
func (r *Replica) LeaderLostCh() <-chan struct{} { return *r.lostCh.Load() }

// Term is the current term.
func (r *Replica) Term() uint64 { return r.term.Load() }

// Applied is the applied index.
func (r *Replica) Applied() uint64 { return r.applied.Load() }

// ShardClock is the shard clock as this replica has applied it: the time
// that passed on the shard's leaders while they stamped entries, which
// ages dedup records (see internal/statemachine). Takes the replica lock.
func (r *Replica) ShardClock() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sm.Clock()
}

// ErrNotFound is returned by Get for an absent key.
var ErrNotFound = statemachine.ErrNotFound

// Get reads key from the local applied state: a serializable read, which
// may be stale on a follower (after ReadIndex returns it is linearizable).
// It returns ErrNotFound for an absent key. Safe for concurrent use.
func (r *Replica) Get(key []byte) (value []byte, version uint64, err error) {
	v, err := r.sm.Get(key)
	return v.Data, v.Version, err
}

// Status returns raft's full status (takes the replica lock).
func (r *Replica) Status() raft.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.rn.Status()
}

// Campaign asks this replica to start an election.
func (r *Replica) Campaign() {
	r.in.Lock()
	r.in.campaign = true
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
}

// TransferLeadership asks the leader to hand leadership to node to.
func (r *Replica) TransferLeadership(to uint64) {
	r.report(func(rn *raft.RawNode) { rn.TransferLeader(to) })
}

// Tick advances the logical clock by one tick.
func (r *Replica) Tick() {
	r.in.Lock()
	r.in.ticks++
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
}

// Step delivers a message from another node. Messages beyond a bound are
// dropped (raft tolerates loss).
func (r *Replica) Step(m raftpb.Message) {
	r.in.Lock()
	if len(r.in.msgs) >= 4*r.cfg.MaxPending {
		r.in.Unlock()
		return
	}
	r.in.msgs = append(r.in.msgs, m)
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
}

// ReportUnreachable tells raft a message to node could not be sent.
func (r *Replica) ReportUnreachable(node uint64) {
	r.report(func(rn *raft.RawNode) { rn.ReportUnreachable(node) })
}

// ReportSnapshot tells raft how sending a snapshot to node ended.
func (r *Replica) ReportSnapshot(node uint64, ok bool) {
	st := raft.SnapshotFinish
	if !ok {
		st = raft.SnapshotFailure
	}
	r.report(func(rn *raft.RawNode) { rn.ReportSnapshot(node, st) })
}

func (r *Replica) report(f func(*raft.RawNode)) {
	r.in.Lock()
	r.in.reports = append(r.in.reports, f)
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
}

// Stop fails every waiter with ErrStopped; Process does nothing afterwards.
func (r *Replica) Stop() {
	r.stopped.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failAllLocked(ErrStopped)
	r.in.Lock()
	for _, p := range r.in.props {
		p.finish(Result{}, ErrStopped)
	}
	for _, w := range r.in.reads {
		w.finish(ErrStopped)
	}
	r.in.props, r.in.reads = nil, nil
	r.in.Unlock()
	r.closeSnapshots()
	r.notifyApplied() // history readers see ErrStopped
}

// LogBounds returns the first and last index held in the raft log.
func (r *Replica) LogBounds() (first, last uint64) { return r.log.Bounds() }

// Hash fingerprints the shard's replicated data (user keys and values)
// from a consistent engine snapshot, with the applied index it reflects.
func (r *Replica) Hash() (applied uint64, hash string, err error) {
	s := r.cfg.Engine.NewSnapshot()
	defer s.Close()
	ab, err := s.Get(storage.AppliedKey(r.id))
	if err != nil {
		return 0, "", err
	}
	as, err := raftlog.UnmarshalAppliedState(ab)
	if err != nil {
		return 0, "", err
	}
	d := r.Desc()
	start, end := storage.DataSpan(d.Start, d.End)
	it, err := s.NewIter(start, end)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	var n [8]byte
	for ok := it.First(); ok; ok = it.Next() {
		binary.BigEndian.PutUint64(n[:], uint64(len(it.Key())))
		h.Write(n[:])
		h.Write(it.Key())
		binary.BigEndian.PutUint64(n[:], uint64(len(it.Value())))
		h.Write(n[:])
		h.Write(it.Value())
	}
	if err := it.Close(); err != nil {
		return 0, "", err
	}
	return as.Index, hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// ReadyLatency is the recent mean time to handle one Ready. A leader whose
// disk stalls or whose CPU is starved shows it here first.
func (r *Replica) ReadyLatency() time.Duration { return time.Duration(r.readyNanos.Load()) }

func (r *Replica) observeReady(d time.Duration) {
	old := r.readyNanos.Load()
	r.readyNanos.Store(old + (int64(d)-old)/4)
}
