package replica

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
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
	"go.etcd.io/raft/v3/tracker"
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
	// this node from the shard; leaving: the applied configuration is a
	// joint one that this node is leaving (a move away from it).
	desc    atomic.Pointer[shard.Descriptor]
	descCh  atomic.Pointer[chan struct{}]
	removed atomic.Bool
	leaving atomic.Bool
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
		// snapDone: per follower, the index of the snapshot this leader
		// last reported sent to it, until its progress passes it (the
		// follower continues from there: maybeTruncateLocked keeps it).
		snapDone map[uint64]uint64
		// lease: the leader lease (lease.go).
		lease leaseState
		// termCommitted: the last term in which this replica, leading,
		// applied an entry of that term; held, heldFwd: reads and
		// forwarded read index requests a one-voter leader holds until
		// then (holdReadsLocked).
		termCommitted uint64
		held          []*waiter
		heldFwd       []raftpb.Message
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
	r.leaving.Store(isLeaving(as.ConfState, cfg.NodeID))
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
		HistoryBytes: cfg.HistoryBytes, Logger: cfg.Logger,
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
		r.mu.lease.restarted = hs.Term > raftlog.InitTerm && !cfg.Created
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

// Leaving reports whether the applied configuration is a joint one this
// node leaves (a move away from it is under way). Such a replica that
// missed the move's last step hears from no leader again: the leader
// sends nothing to a node outside its configuration, and the replica
// stays until the store collects it.
func (r *Replica) Leaving() bool { return r.leaving.Load() }

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

// Tick advances the logical clock by one tick. It returns the ticks now
// waiting for the replica's next round: more than one only while its
// rounds fall behind the ticker (a long round, a busy node, a stall).
func (r *Replica) Tick() (pending int) {
	r.in.Lock()
	r.in.ticks++
	pending = r.in.ticks
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
	return pending
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
	r.report(func(rn *raft.RawNode) {
		if ok {
			rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
				if id == node && pr.State == tracker.StateSnapshot && pr.PendingSnapshot > 0 {
					if r.mu.snapDone == nil {
						r.mu.snapDone = map[uint64]uint64{}
					}
					r.mu.snapDone[node] = pr.PendingSnapshot
				}
			})
		}
		rn.ReportSnapshot(node, st)
	})
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
