package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Config of a Store.
type Config struct {
	NodeID uint64
	Engine *storage.Engine
	Map    shard.Map
	// Workers processing Readies. Default 8: a Ready blocks on fsync, so
	// more workers than cores keep several shards' syncs in flight.
	Workers int
	// TickInterval is one raft tick. Default 100ms.
	TickInterval time.Duration
	// ElectionTick and HeartbeatTick in ticks. Defaults 10 and 1.
	ElectionTick, HeartbeatTick int
	// LeaseReads: a leader answers linearizable reads without a quorum
	// round for LeaseDuration() after one (replica.Config.LeaseDuration).
	LeaseReads bool
	// BalanceInterval: how often leadership is moved back to preferred
	// nodes. Default 5s; negative disables.
	BalanceInterval time.Duration
	// MaxSnapshots in flight from this node. Default 2.
	MaxSnapshots int
	// SnapshotChunk is the size of one chunk of a streamed snapshot, in
	// bytes (a record larger than it travels alone). Default 1 MiB.
	SnapshotChunk int
	// SickThreshold: a leader whose Readies take longer than this on
	// average (stalled disk, starved CPU) hands leadership to its most
	// up-to-date follower. Default 300ms; negative disables.
	SickThreshold time.Duration
	// OrphanInterval: how often replicas without a leader check whether
	// their shard removed them while they were away (orphans.go).
	// Default 10s; negative disables.
	OrphanInterval time.Duration
	// ScrubInterval: how often each shard's leader has its replicas hash
	// their data and compare it (scrub.go, docs/scrub.md), and how often
	// the engine's sstable checksums are verified. 0 (the default): no
	// scrubbing, and replicas opened from disk serve reads at once.
	ScrubInterval time.Duration
	// ScrubWait: how long a replica waits for its peers' hashes of a
	// scrub before judging with those it has. Default 30s.
	ScrubWait time.Duration
	// SplitSize: a shard this node leads whose data takes more than this
	// many bytes on disk (sstables; the memtable is not counted) is split
	// in two halves of its token range (split.go). Default 256 MiB;
	// negative disables automatic splits.
	SplitSize int64
	// SplitCheckInterval: how often the leaders' sizes and write loads
	// are checked. Default 30s.
	SplitCheckInterval time.Duration
	// SplitLoad: a shard this node leads whose log grew by more than this
	// many entries per second (its writes, mostly) at SplitLoadChecks
	// checks in a row is split like one that passed SplitSize, so that
	// its halves can be led, and held, by different nodes. Default 0:
	// never split for load.
	SplitLoad float64
	// SplitLoadChecks: how many checks in a row a shard's write load must
	// stay above SplitLoad. Default 3 (90 s at the default interval).
	SplitLoadChecks int
	// PeerWait: how long a replica move waits for its destination to
	// become a known peer of the shard's leader. A node that just joined
	// is known at once to the node that admitted it, but the others learn
	// its address from the membership record, which they read about once
	// a second; a move asked in between must not fail for that. Default
	// 5s; negative: do not wait.
	PeerWait time.Duration
	// Replica holds per-replica tuning (truncation, pending bounds); its
	// identity fields are filled by the store.
	Replica replica.Config
	Logger  *slog.Logger
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTick == 0 {
		c.ElectionTick = 10
	}
	if c.HeartbeatTick == 0 {
		c.HeartbeatTick = 1
	}
	if c.BalanceInterval == 0 {
		c.BalanceInterval = 5 * time.Second
	}
	if c.MaxSnapshots == 0 {
		c.MaxSnapshots = 2
	}
	if c.SnapshotChunk <= 0 {
		c.SnapshotChunk = replica.DefaultSnapshotChunk
	}
	if c.SickThreshold == 0 {
		c.SickThreshold = 300 * time.Millisecond
	}
	if c.OrphanInterval == 0 {
		c.OrphanInterval = 10 * time.Second
	}
	if c.ScrubWait == 0 {
		c.ScrubWait = 30 * time.Second
	}
	if c.SplitSize == 0 {
		c.SplitSize = DefaultSplitSize
	}
	if c.SplitCheckInterval == 0 {
		c.SplitCheckInterval = 30 * time.Second
	}
	if c.SplitLoadChecks == 0 {
		c.SplitLoadChecks = 3
	}
	if c.PeerWait == 0 {
		c.PeerWait = 5 * time.Second
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
		return errors.New("store: Config.NodeID is required")
	case c.Engine == nil:
		return errors.New("store: Config.Engine is required")
	case c.Workers < 1:
		return fmt.Errorf("store: Workers %d: want at least 1", c.Workers)
	case c.TickInterval <= 0:
		return fmt.Errorf("store: TickInterval %s: want a positive duration", c.TickInterval)
	case c.ScrubInterval < 0:
		return fmt.Errorf("store: ScrubInterval %s: want 0 (off) or a positive duration", c.ScrubInterval)
	case c.ScrubWait < 0:
		return fmt.Errorf("store: ScrubWait %s: want a positive duration", c.ScrubWait)
	case c.SplitCheckInterval < 0:
		return fmt.Errorf("store: SplitCheckInterval %s: want a positive duration", c.SplitCheckInterval)
	case c.SplitLoad < 0 || c.SplitLoadChecks < 1:
		return fmt.Errorf("store: SplitLoad %g, SplitLoadChecks %d: want 0 (off) or more entries/s and at least one check", c.SplitLoad, c.SplitLoadChecks)
	case c.MaxSnapshots < 1:
		return fmt.Errorf("store: MaxSnapshots %d: want at least 1", c.MaxSnapshots)
	}
	return nil
}

// Store is all replicas of one node.
type Store struct {
	cfg   Config
	tr    transport.Transport
	sched *sched
	// readers holds the ids of the read replica nodes (SetReadReplicas):
	// their learners are there to stay, no move under way.
	readers atomic.Pointer[map[uint64]bool]
	// mu guards the set of local replicas and what the node knows of the
	// shards it holds no replica of (descriptors.go).
	mu struct {
		sync.RWMutex
		replicas map[uint64]*replica.Replica
		// known: the latest descriptor seen of every shard (the bootstrap
		// map's, then newer ones), used when no local replica has one.
		known map[uint64]shard.Descriptor
		// tombs: shards whose local replica was removed, with the epoch
		// of the descriptor that removed it.
		tombs map[uint64]uint64
	}
	// lifecycle serializes the creation and the deletion of local
	// replicas (CreateReplica, removeLocal; descriptors.go): a removal
	// runs whole (the replica stopped, its state deleted under a
	// tombstone) before a creation of the same shard looks at the engine,
	// and a removal that comes after a newer replica was created finds it.
	lifecycle sync.Mutex
	// removals: replicas that applied their own removal, waiting for the
	// reaper (descriptors.go).
	removals struct {
		sync.Mutex
		queue []shard.Descriptor
		wake  chan struct{}
	}
	// route is the routing table built from the known descriptors
	// (routing.go), rebuilt when dirty.
	route struct {
		table atomic.Pointer[routeTable]
		dirty atomic.Bool
	}
	snapSem chan struct{}
	// moved and refused are owned by the balancer goroutine: when
	// leadership handed to a preferred node comes straight back, that node
	// gave it away as sick and is not offered it again for a minute.
	moved   map[uint64]time.Time
	refused map[uint64]time.Time
	// leaderApplied counts writes applied by this node's leader replicas.
	leaderApplied atomic.Uint64
	// leaseReads counts reads this node's leaders answered under a lease.
	leaseReads atomic.Uint64
	// lastStallDump: when reportStall last dumped the stacks (Unix ns).
	lastStallDump atomic.Int64
	// drops counts the messages from peers dropped, by reason.
	drops     [numDrops]atomic.Uint64
	snapStats snapCounters
	// scrub: hashing, comparing and repairing (scrub.go).
	scrub  scrubState
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// startup: what the replicas' opening saw (startup.go).
	startup startupInfo
}

// New opens every local replica of the map. bootstrap allows creating the
// state of replicas that have none (a new cluster).
func New(cfg Config, bootstrap bool) (*Store, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, snapSem: make(chan struct{}, cfg.MaxSnapshots),
		moved: map[uint64]time.Time{}, refused: map[uint64]time.Time{}}
	s.mu.replicas = map[uint64]*replica.Replica{}
	s.mu.known = map[uint64]shard.Descriptor{}
	s.mu.tombs = map[uint64]uint64{}
	s.removals.wake = make(chan struct{}, 1)
	s.scrub.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sched = newSched(nil)
	began := time.Now()
	if err := s.openReplicas(bootstrap); err != nil {
		return nil, err
	}
	s.noteOpened(began)
	return s, nil
}

// LeaseDuration is how long a leader's lease lasts after the start of a
// quorum round: 90 % of ElectionTick-3 ticks. A follower refuses votes
// for ElectionTick ticks after it hears from its leader; two of them can
// come at once after the message (the tick the ticker loop was handing
// out when its goroutine stalled, and the one its time.Ticker kept
// pending meanwhile) and a third any time later (the next period
// boundary); the 10 % is for clocks running at different rates
// (docs/architecture.md). Zero (no lease) when the election timeout is
// under four ticks. c must have its defaults (EnsureDefaults).
func (c Config) LeaseDuration() time.Duration {
	if c.ElectionTick < 4 {
		return 0
	}
	return time.Duration(c.ElectionTick-3) * c.TickInterval * 9 / 10
}

// replicaConfig is the configuration of the local replica of d.
func (s *Store) replicaConfig(d shard.Descriptor) replica.Config {
	rc := s.cfg.Replica
	rc.NodeID, rc.Desc, rc.Engine = s.cfg.NodeID, d, s.cfg.Engine
	rc.Send, rc.Enqueue = s.send, s.sched.enqueue
	rc.PeersLease = true // whatever this node's --lease-reads (replica.Config.PeersLease)
	rc.ElectionTick, rc.HeartbeatTick = s.cfg.ElectionTick, s.cfg.HeartbeatTick
	if s.cfg.LeaseReads {
		rc.LeaseDuration = s.cfg.LeaseDuration()
	}
	rc.Logger = s.cfg.Logger
	rc.LeaderApplied = &s.leaderApplied
	rc.LeaseReads = &s.leaseReads
	rc.OnRemoved = s.queueRemoval
	if s.cfg.ScrubInterval > 0 {
		rc.OnScrub = s.queueScrub
	}
	rc.OnSplit = s.addSplit
	rc.OnRangeChange = s.routesChanged
	return rc
}

// replica returns the local replica of a shard, or nil.
func (s *Store) replica(id uint64) *replica.Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.replicas[id]
}

// replicaList returns the local replicas (a copy of the set).
func (s *Store) replicaList() []*replica.Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*replica.Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		out = append(out, r)
	}
	return out
}

// SetTransport must be called before Start.
func (s *Store) SetTransport(t transport.Transport) { s.tr = t }

// Start starts the workers, the ticker and the balancer. With campaign,
// every replica whose node is its shard's preferred leader campaigns at
// once (a freshly bootstrapped cluster elects its leaders without waiting
// for an election timeout).
func (s *Store) Start(campaign bool) {
	for i := 0; i < s.cfg.Workers; i++ {
		s.goFunc(s.worker)
	}
	s.goFunc(s.ticker)
	s.goFunc(s.reaper)
	s.goFunc(s.startupWatch)
	if s.cfg.OrphanInterval > 0 {
		s.goFunc(s.orphans)
	}
	if s.cfg.BalanceInterval > 0 {
		s.goFunc(s.balancer)
	}
	if s.cfg.SickThreshold > 0 {
		s.goFunc(s.health)
	}
	if s.cfg.ScrubInterval > 0 {
		s.goFunc(s.scrubber)
		s.goFunc(s.hasher)
	}
	if s.cfg.SplitSize > 0 || s.cfg.SplitLoad > 0 {
		s.goFunc(s.splitter)
	}
	if campaign {
		for _, r := range s.replicaList() {
			if d := r.Desc(); len(d.Replicas) > 0 && d.Replicas[0] == s.cfg.NodeID {
				r.Campaign()
			}
		}
	}
}

func (s *Store) goFunc(f func()) {
	s.wg.Add(1)
	go func() { defer s.wg.Done(); f() }()
}

// Stop stops every goroutine and fails pending requests.
func (s *Store) Stop() {
	s.cancel()
	s.wg.Wait()
	for _, r := range s.replicaList() {
		r.Stop()
	}
}

// LeaderApplied is the number of writes applied by this node while it led
// their shard: with the engine's fsync count, the writes per fsync.
func (s *Store) LeaderApplied() uint64 { return s.leaderApplied.Load() }

// LeaseReads is the number of read index requests this node's leaders
// answered under their lease, without a quorum round.
func (s *Store) LeaseReads() uint64 { return s.leaseReads.Load() }

// Replica returns the local replica of a shard, or nil.
func (s *Store) Replica(id uint64) *replica.Replica { return s.replica(id) }

// Replicas returns every local replica (a copy of the set: replicas come
// and go with moves).
func (s *Store) Replicas() map[uint64]*replica.Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[uint64]*replica.Replica, len(s.mu.replicas))
	for id, r := range s.mu.replicas {
		out[id] = r
	}
	return out
}

// NodeID is the local node's id.
func (s *Store) NodeID() uint64 { return s.cfg.NodeID }

// worker runs the Ready contract for the shards waiting in the queue
// when it wakes (up to maxGroup): their Readies' entries and hard states
// go into one batch, committed with one fsync (group commit), then each
// shard sends, applies and advances. Under load this turns many shards'
// small synced commits into one, as etcd's single Raft loop does for its
// one group.
func (s *Store) worker() {
	var ids []uint64
	var rounds []*replica.Round
	var owners []*replica.Replica
	for {
		select {
		case id := <-s.sched.queue:
			ids = append(ids[:0], id)
		case <-s.ctx.Done():
			return
		}
	more:
		for len(ids) < maxGroup {
			select {
			case id := <-s.sched.queue:
				ids = append(ids, id)
			default:
				break more
			}
		}
		b := s.cfg.Engine.NewBatch()
		rounds, owners = rounds[:0], owners[:0]
		sync := false
		for _, id := range ids {
			r := s.replica(id)
			if !s.sched.begin(id) || r == nil {
				continue
			}
			if rr, sy := r.Stage(b); rr != nil {
				rounds, owners = append(rounds, rr), append(owners, r)
				sync = sync || sy
			}
		}
		if len(rounds) == 0 {
			b.Close()
		} else if err := b.Commit(sync); err != nil {
			panic("store: persist readies: " + err.Error())
		}
		for i, rr := range rounds {
			owners[i].Finish(rr)
		}
		for _, id := range ids {
			s.sched.done(id)
		}
	}
}

// maxGroup bounds the shards whose Readies one worker persists together.
const maxGroup = 16

func (s *Store) ticker() {
	t := time.NewTicker(s.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			for _, r := range s.replicaList() {
				if n := r.Tick(); n == s.stallTicks() {
					s.reportStall(r, n)
				}
			}
		case <-s.ctx.Done():
			return
		}
	}
}

// send is every replica's Config.Send: it groups messages by destination;
// snapshots go on their own bounded path.
func (s *Store) send(shardID uint64, msgs []raftpb.Message) {
	if s.tr == nil {
		return
	}
	var byPeer map[uint64][]transport.Envelope
	for _, m := range msgs {
		if m.Type == raftpb.MsgSnap {
			s.sendSnapshot(shardID, m)
			continue
		}
		if byPeer == nil {
			byPeer = map[uint64][]transport.Envelope{}
		}
		byPeer[m.To] = append(byPeer[m.To], transport.Envelope{ShardID: shardID, Msg: m})
	}
	for to, envs := range byPeer {
		s.tr.Send(to, envs)
	}
}

// Unreachable is the transport's callback for lost messages.
func (s *Store) Unreachable(to uint64, shardIDs []uint64) {
	seen := map[uint64]bool{}
	for _, id := range shardIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		if r := s.replica(id); r != nil {
			r.ReportUnreachable(to)
		}
	}
}

// balancer moves leadership back to each shard's preferred node once that
// node's replica is active and fully caught up, so leaders stay spread.
func (s *Store) balancer() {
	t := time.NewTicker(s.cfg.BalanceInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		now := time.Now()
		for _, r := range s.replicaList() {
			d := r.Desc()
			if !r.IsLeader() || len(d.Replicas) == 0 || d.Replicas[0] == s.cfg.NodeID || moveUnderWay(d, s.readReplicas()) {
				continue
			}
			if t, ok := s.moved[d.ID]; ok && now.Sub(t) < time.Minute {
				// We handed it over and it came back within a minute.
				s.refused[d.ID] = now.Add(time.Minute)
				delete(s.moved, d.ID)
			}
			if now.Before(s.refused[d.ID]) {
				continue
			}
			st := r.Status()
			pr, ok := st.Progress[d.Replicas[0]]
			if !ok || !pr.RecentActive || pr.State != tracker.StateReplicate || pr.Match < st.Commit {
				continue
			}
			if s.tr != nil && !s.tr.Reachable(d.Replicas[0]) {
				continue
			}
			s.cfg.Logger.Info("moving leadership to preferred node", "shard", d.ID, "to", d.Replicas[0])
			r.TransferLeadership(d.Replicas[0])
			s.moved[d.ID] = now
		}
	}
}

// health hands leadership away from this node's replicas when the node is
// sick, to the follower that is most up to date, so a sick node does not
// keep its shards' throughput down while the fault lasts. Sick means either
// a replica's Readies have become slow (a stalled disk) or the node itself
// is starved of CPU: a sleep of a random 50–150 ms (random, so it cannot
// alias with a CPU quota's period) overruns by over 20 ms in at least 3 of
// the last 10 rounds. Starvation does not move the leadership of a
// shard with a move under way (moveUnderWay). A leadership this node took less than
// starvedMinLead ago is not handed away for starvation: when the whole
// machine is short of CPU (every node late), each node would otherwise
// hand its leaderships to another just as starved, which hands them on
// within a second, and the shards spend the load's worst moments
// changing leaders (seen during joins on a shared 2-core machine: a
// handover every few hundred milliseconds).
func (s *Store) health() {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var late [10]bool
	since := leadClock{}
	for n := 0; ; n++ {
		d := 50*time.Millisecond + time.Duration(rng.Int63n(int64(100*time.Millisecond)))
		start := time.Now()
		select {
		case <-time.After(d):
		case <-s.ctx.Done():
			return
		}
		late[n%len(late)] = time.Since(start)-d > 20*time.Millisecond
		lateCount := 0
		for _, l := range late {
			if l {
				lateCount++
			}
		}
		starved := n >= len(late) && lateCount >= 3
		now := time.Now()
		replicas := s.replicaList()
		observeLeads(since, replicas, now)
		for _, r := range replicas {
			if !r.IsLeader() {
				continue
			}
			slow := r.ReadyLatency() >= s.cfg.SickThreshold
			if !slow && (!starved || now.Sub(since[r.ID()]) < starvedMinLead || moveUnderWay(r.Desc(), s.readReplicas())) {
				continue
			}
			st := r.Status()
			var best, bestMatch uint64
			for id, pr := range st.Progress {
				if id == s.cfg.NodeID || !pr.RecentActive || pr.State != tracker.StateReplicate {
					continue
				}
				if s.tr != nil && !s.tr.Reachable(id) {
					continue
				}
				if pr.Match >= bestMatch {
					best, bestMatch = id, pr.Match
				}
			}
			if best == 0 {
				continue
			}
			s.cfg.Logger.Warn("node is sick: handing leadership over", "shard", r.ID(), "starved", starved,
				"late_ticks", lateCount, "ready_latency", r.ReadyLatency().Round(time.Millisecond), "to", best)
			r.TransferLeadership(best)
		}
	}
}

// SetReadReplicas tells the store which nodes are read replicas (the
// membership record's, as the node last read it).
func (s *Store) SetReadReplicas(ids map[uint64]bool) { s.readers.Store(&ids) }

// moveUnderWay reports whether d has a learner other than a read
// replica's (readers): a replica being added, whose snapshot streams from
// the leader. A leadership change then wastes the stream (the learner
// refuses a snapshot of an older term), so neither the preferred-leader
// balancer nor a starved node moves the leadership of such a shard; the
// move hands it over itself when it removes the leader's replica. A read
// replica's learner is there to stay and is no move.
func moveUnderWay(d shard.Descriptor, readers map[uint64]bool) bool {
	for _, id := range d.Learners {
		if !readers[id] {
			return true
		}
	}
	return false
}

// readReplicas is the set SetReadReplicas last gave (nil: none).
func (s *Store) readReplicas() map[uint64]bool {
	if p := s.readers.Load(); p != nil {
		return *p
	}
	return nil
}

// starvedMinLead: a leadership taken less than this long ago is kept
// though the node looks starved of CPU (Store.health).
const starvedMinLead = 5 * time.Second

// leadClock holds when this node was first seen leading each shard it
// leads now (Store.health's rounds).
type leadClock map[uint64]time.Time

// leader is what leadClock needs of a replica.
type leader interface {
	ID() uint64
	IsLeader() bool
}

// observeLeads records now in c for the shards led now and not at the last call,
// and forgets the shards no longer led.
func observeLeads[R leader](c leadClock, replicas []R, now time.Time) {
	led := map[uint64]bool{}
	for _, r := range replicas {
		if !r.IsLeader() {
			continue
		}
		led[r.ID()] = true
		if _, ok := c[r.ID()]; !ok {
			c[r.ID()] = now
		}
	}
	for id := range c {
		if !led[id] {
			delete(c, id)
		}
	}
}
