package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// Mover is what the balancer needs of the store: the live shard
// descriptors and replica moves. Each call may take long (a snapshot
// transfer); it is idempotent and resumable.
type Mover interface {
	Descriptors() []shard.Descriptor
	// LearnDescriptor records d as its shard's current view when it is
	// newer than the one held (a shard a split made that this node
	// holds no replica of: moves of it need the store to know it).
	LearnDescriptor(d shard.Descriptor) bool
	// MoveReplica moves shard's replica on from (which may be dead) to to.
	MoveReplica(ctx context.Context, shardID, from, to uint64) error
	// AddReplica adds a replica of shard on to (as a learner only if
	// learnerOnly).
	AddReplica(ctx context.Context, shardID, to uint64, learnerOnly bool) error
	// RemoveReplica removes shard's replica on node.
	RemoveReplica(ctx context.Context, shardID, node uint64) error
}

// Prober tells whether a node answers now, and what it holds.
type Prober interface {
	Alive(ctx context.Context, node uint64) bool
	// Replicas returns the descriptors of node's local replicas, each as
	// that replica applied it (wire.NodeInfo's).
	Replicas(ctx context.Context, node uint64) ([]shard.Descriptor, error)
}

// BalancerConfig configures a Balancer.
type BalancerConfig struct {
	NodeID  uint64
	Manager *Manager
	Mover   Mover
	Prober  Prober
	// Leads reports whether this node leads shard 1 now: only that node
	// balances. Required.
	Leads       func() bool
	Replication int
	// Interval between two rounds. Default 2s.
	Interval time.Duration
	// DeadNodeTimeout: a member not answering for this long is declared
	// dead (when enough active nodes remain to replace its replicas).
	// Default 5m; negative disables.
	DeadNodeTimeout time.Duration
	// TransferLimit bounds the moves touching one node at once, unless the
	// record's settings say otherwise. Default 2.
	TransferLimit int
	// MaxMoves bounds the moves planned in one round. Default 8.
	MaxMoves int
	// MoveTimeout bounds one move. Default 10m.
	MoveTimeout time.Duration
	// RetryAfter: a shard whose move failed gets no other for this long.
	// Default 30s.
	RetryAfter time.Duration
	// ManualPause: a change of a shard's replicas the balancer did not
	// make (cairn admin shard move) pauses rebalancing for this long, so
	// the balancer does not undo an operator's move at once; repairs go
	// on. Default 2m; negative: never pause.
	ManualPause time.Duration
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c BalancerConfig) EnsureDefaults() BalancerConfig {
	if c.Interval == 0 {
		c.Interval = 2 * time.Second
	}
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = 5 * time.Minute
	}
	if c.TransferLimit == 0 {
		c.TransferLimit = 2
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 8
	}
	if c.MoveTimeout == 0 {
		c.MoveTimeout = 10 * time.Minute
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 30 * time.Second
	}
	if c.ManualPause == 0 {
		c.ManualPause = 2 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first field of a filled config out of range.
func (c BalancerConfig) Validate() error {
	switch {
	case c.NodeID == 0 || c.Manager == nil || c.Mover == nil || c.Prober == nil || c.Leads == nil:
		return errors.New("cluster: BalancerConfig needs NodeID, Manager, Mover, Prober and Leads")
	case c.Replication < 1:
		return fmt.Errorf("cluster: Replication %d: want at least 1", c.Replication)
	case c.Interval <= 0 || c.MoveTimeout <= 0 || c.RetryAfter <= 0:
		return errors.New("cluster: Interval, MoveTimeout and RetryAfter must be positive")
	case c.TransferLimit < 1 || c.MaxMoves < 1:
		return fmt.Errorf("cluster: TransferLimit %d and MaxMoves %d: want at least 1", c.TransferLimit, c.MaxMoves)
	}
	return nil
}

// Balancer keeps replicas placed (see the package doc).
type Balancer struct {
	cfg BalancerConfig
	wg  sync.WaitGroup
	mu  struct {
		sync.Mutex
		leading  bool
		inflight map[uint64]Move // by shard
		failed   map[uint64]time.Time
		lastSeen map[uint64]time.Time
		moved    uint64
		// epochs is each shard's epoch seen last round (empty: not
		// balancing); touched holds the shards this balancer moved
		// lately: zero while the move runs, then when it ended.
		epochs  map[uint64]uint64
		touched map[uint64]time.Time
		// pausedUntil: no rebalancing before (a manual move was seen).
		pausedUntil time.Time
		// since is when this node last became the balancer; moving holds
		// the shards seen last round in the middle of a change (a
		// learner, or a joint configuration).
		since  time.Time
		moving map[uint64]bool
		// shapes is each shard's voters and learners other than read
		// replicas' seen last round (role.go: shapeOf).
		shapes map[uint64]string
		// learnerFree holds the DropLearners members seen last round
		// with no learner and no move (finishLearnerDrops).
		learnerFree map[uint64]bool
		// drainLogged: when finishDecommissions last logged why a
		// drained-looking member stays (decommission.go).
		drainLogged map[uint64]time.Time
	}
}

// NewBalancer returns a Balancer; Run starts it.
func NewBalancer(cfg BalancerConfig) (*Balancer, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Balancer{cfg: cfg}
	b.mu.inflight = map[uint64]Move{}
	b.mu.failed = map[uint64]time.Time{}
	b.mu.lastSeen = map[uint64]time.Time{}
	b.mu.epochs = map[uint64]uint64{}
	b.mu.moving = map[uint64]bool{}
	b.mu.shapes = map[uint64]string{}
	b.mu.touched = map[uint64]time.Time{}
	b.mu.learnerFree = map[uint64]bool{}
	b.mu.drainLogged = map[uint64]time.Time{}
	return b, nil
}

// BalancerStatus is what GET /v1/admin/nodes shows of the balancer.
type BalancerStatus struct {
	// Leading: this node runs the balancer (it leads shard 1).
	Leading  bool   `json:"leading"`
	InFlight []Move `json:"in_flight"`
	// Moved counts the moves this node finished.
	Moved uint64 `json:"moved"`
	// PausedUntil: rebalancing waits until then after a manual move (zero
	// when not paused).
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Status reports what the balancer does now.
func (b *Balancer) Status() BalancerStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BalancerStatus{Leading: b.mu.leading, Moved: b.mu.moved, InFlight: []Move{}}
	if b.cfg.Now().Before(b.mu.pausedUntil) {
		st.PausedUntil = b.mu.pausedUntil
	}
	for _, mv := range b.mu.inflight {
		st.InFlight = append(st.InFlight, mv)
	}
	return st
}

// Run runs a round every Interval until ctx ends, then waits for the
// moves it started (their contexts end with ctx).
func (b *Balancer) Run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.wg.Wait()
			return
		case <-t.C:
		}
		if err := b.Round(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Logger.Debug("balancer round", "err", err)
		}
	}
}

// Wait waits for the moves started by Round.
func (b *Balancer) Wait() { b.wg.Wait() }

// Round runs one round: when this node leads shard 1, read the record,
// probe the members, declare dead the silent ones, mark drained
// decommissioning nodes removed, and start the moves the planner asks for.
func (b *Balancer) Round(ctx context.Context) error {
	if !b.cfg.Leads() {
		b.mu.Lock()
		b.mu.leading = false
		clear(b.mu.lastSeen)
		clear(b.mu.epochs)
		clear(b.mu.moving)
		clear(b.mu.shapes)
		clear(b.mu.learnerFree)
		b.mu.Unlock()
		return nil
	}
	rec, err := b.cfg.Manager.Read(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if !b.mu.leading {
		b.mu.since = b.cfg.Now()
	}
	b.mu.leading = true
	b.mu.Unlock()
	if rec, err = b.detectDead(ctx, rec); err != nil {
		return err
	}
	descs := b.cfg.Mover.Descriptors()
	if rec, err = b.finishDecommissions(ctx, rec, descs); err != nil {
		return err
	}
	// (It may have learned shards from the members: a split's new half.)
	descs = b.cfg.Mover.Descriptors()
	if rec, err = b.finishLearnerDrops(ctx, rec, descs); err != nil {
		return err
	}
	limit := b.cfg.TransferLimit
	if rec.Settings.TransferLimit != nil {
		limit = *rec.Settings.TransferLimit
	}
	now := b.cfg.Now()
	b.mu.Lock()
	readers := stayingLearners(rec)
	b.noticeManualLocked(descs, now, readers)
	in := PlanInput{Members: rec.Members, Replication: b.cfg.Replication, TransferLimit: limit, MaxMoves: b.cfg.MaxMoves,
		NoBalance: now.Before(b.mu.pausedUntil) || rec.RebalancingOff(now)}
	for _, mv := range b.mu.inflight {
		in.InFlight = append(in.InFlight, mv)
	}
	takingOver := now.Sub(b.mu.since) < touchGrace
	for _, d := range descs {
		// A shard whose move failed lately sits out a while.
		if t, ok := b.mu.failed[d.ID]; ok && now.Sub(t) < b.cfg.RetryAfter {
			in.Skip = append(in.Skip, d.ID)
		}
		if _, ours := b.mu.inflight[d.ID]; !ours && takingOver {
			in.InFlight, in.Skip = predecessorMoves(d, b.cfg.Replication, readers, in.InFlight, in.Skip)
		}
		in.Shards = append(in.Shards, d)
	}
	b.mu.Unlock()
	for _, mv := range Plan(in) {
		b.start(ctx, mv)
	}
	return nil
}

// predecessorMoves adds to inFlight and skip what a shard in the middle
// of a change that this balancer did not start stands for while it takes
// over (touchGrace): the previous balancer's move, which runs on. Each
// learner is a replica on its way to its node: counted there, and
// charged to that node's transfer limit, so that the new balancer does
// not send the same node its share a second time (a join then moved
// replicas onto the new node and back off again, each a snapshot); a
// joint configuration (more voters than the replication factor) is left
// alone. A read replica's learner (readers) is there to stay: no move.
func predecessorMoves(d shard.Descriptor, replication int, readers map[uint64]bool, inFlight []Move, skip []uint64) ([]Move, []uint64) {
	moving := false
	for _, n := range d.Learners {
		if !readers[n] { // a read replica's learner stays: no move
			inFlight = append(inFlight, Move{Shard: d.ID, To: n, Reason: Balance})
			moving = true
		}
	}
	if !moving && len(d.Replicas) > replication {
		skip = append(skip, d.ID)
	}
	return inFlight, skip
}

// touchGrace is how long after its move ends a shard's changes are still
// taken as the balancer's own, and how long after this node became the
// balancer changes are taken as the previous balancer's (whose moves in
// flight run on after it lost the role).
const touchGrace = 30 * time.Second

// noticeManualLocked pauses rebalancing when a shard's epoch changed
// since the last round without this balancer moving it (an operator's
// move), and records the epochs. A change is not taken for a manual one
// while this node has just become the balancer (touchGrace: the previous
// balancer's moves run on), nor when the shard was already in the middle
// of a change last round (it continues a move under way, whoever runs
// it; a move asked by hand writes its pause into the record anyway), nor
// when only read replicas' learners changed (role.go).
func (b *Balancer) noticeManualLocked(descs []shard.Descriptor, now time.Time, readers map[uint64]bool) {
	first := len(b.mu.epochs) == 0
	takingOver := now.Sub(b.mu.since) < touchGrace
	for _, d := range descs {
		prev, seen := b.mu.epochs[d.ID]
		ended, ours := b.mu.touched[d.ID]
		underWay := b.mu.moving[d.ID]
		b.mu.moving[d.ID] = movingLearners(d, readers) || len(d.Replicas) > b.cfg.Replication
		shape := shapeOf(d, readers)
		readersOnly := seen && b.mu.shapes[d.ID] == shape
		b.mu.shapes[d.ID] = shape
		if !first && !takingOver && !underWay && !readersOnly && b.cfg.ManualPause > 0 && (!seen || prev != d.Epoch) && !ours {
			if !now.Before(b.mu.pausedUntil) {
				b.cfg.Logger.Info("balancer: a shard changed by hand; rebalancing pauses", "shard", d.ID,
					"epoch", d.Epoch, "for", b.cfg.ManualPause)
			}
			b.mu.pausedUntil = now.Add(b.cfg.ManualPause)
		}
		b.mu.epochs[d.ID] = d.Epoch
		// This node's view of a shard it does not lead may show the
		// move's last steps a little after the move returned.
		if ours && !ended.IsZero() && now.Sub(ended) > touchGrace {
			delete(b.mu.touched, d.ID)
		}
	}
}

// start runs mv in its own goroutine.
func (b *Balancer) start(ctx context.Context, mv Move) {
	b.mu.Lock()
	b.mu.inflight[mv.Shard] = mv
	b.mu.touched[mv.Shard] = time.Time{}
	b.mu.Unlock()
	b.cfg.Logger.Info("balancer: moving a replica", "shard", mv.Shard, "from", mv.From, "to", mv.To, "reason", mv.Reason)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		mctx, cancel := context.WithTimeout(ctx, b.cfg.MoveTimeout)
		defer cancel()
		var err error
		switch {
		case mv.Learner && mv.To == 0:
			err = b.cfg.Mover.RemoveReplica(mctx, mv.Shard, mv.From)
		case mv.From == 0:
			err = b.cfg.Mover.AddReplica(mctx, mv.Shard, mv.To, mv.Learner)
		default:
			err = b.cfg.Mover.MoveReplica(mctx, mv.Shard, mv.From, mv.To)
		}
		b.mu.Lock()
		delete(b.mu.inflight, mv.Shard)
		b.mu.touched[mv.Shard] = b.cfg.Now()
		if err != nil {
			b.mu.failed[mv.Shard] = b.cfg.Now()
		} else {
			delete(b.mu.failed, mv.Shard)
			b.mu.moved++
		}
		b.mu.Unlock()
		if err != nil {
			b.cfg.Logger.Warn("balancer: move failed; the shard waits before another", "shard", mv.Shard,
				"from", mv.From, "to", mv.To, "err", err, "retry_after", b.cfg.RetryAfter)
		} else {
			b.cfg.Logger.Info("balancer: replica moved", "shard", mv.Shard, "from", mv.From, "to", mv.To)
		}
	}()
}

// detectDead probes every other active or decommissioning member and
// declares dead one silent for DeadNodeTimeout, if enough active nodes
// remain to take its replicas.
func (b *Balancer) detectDead(ctx context.Context, rec Record) (Record, error) {
	if b.cfg.DeadNodeTimeout < 0 {
		return rec, nil
	}
	type answer struct {
		id    uint64
		alive bool
	}
	var probed []uint64
	for _, m := range rec.Members {
		if m.ID != b.cfg.NodeID && !m.State.Gone() {
			probed = append(probed, m.ID)
		}
	}
	answers := make(chan answer, len(probed))
	pctx, cancel := context.WithTimeout(ctx, min(b.cfg.Interval, time.Second))
	defer cancel()
	for _, id := range probed {
		go func() { answers <- answer{id, b.cfg.Prober.Alive(pctx, id)} }()
	}
	now := b.cfg.Now()
	var dead []uint64
	b.mu.Lock()
	for range probed {
		a := <-answers
		seen, ok := b.mu.lastSeen[a.id]
		switch {
		case a.alive || !ok:
			// A member is first seen when this node starts balancing: a
			// new balancer gives every member the whole timeout.
			b.mu.lastSeen[a.id] = now
		case now.Sub(seen) >= b.cfg.DeadNodeTimeout:
			dead = append(dead, a.id)
		}
	}
	b.mu.Unlock()
	// A shard keeps a quorum of voters on nodes neither dead nor silent,
	// or none of its voters is declared dead: its replacement moves need
	// that quorum, and a node declared dead never serves again, so two
	// silent nodes holding a majority of one shard's voters (a rack down,
	// a partition) are left to come back rather than lose the shard.
	silent := map[uint64]bool{}
	for _, id := range dead {
		silent[id] = true
	}
	var descs []shard.Descriptor
	if len(dead) > 0 {
		descs = b.cfg.Mover.Descriptors()
	}
	for _, id := range dead {
		if m, _ := rec.Member(id); !m.ReadReplica() && rec.CountVoters()-1 < b.cfg.Replication {
			b.cfg.Logger.Warn("balancer: a node is silent but too few active nodes remain to replace it; not declaring it dead",
				"id", id, "timeout", b.cfg.DeadNodeTimeout)
			continue
		}
		if sh, ok := quorumAway(descs, rec, silent, id); ok {
			b.cfg.Logger.Warn("balancer: a node is silent but a shard it holds has no quorum of voters left without it; not declaring it dead",
				"id", id, "shard", sh, "timeout", b.cfg.DeadNodeTimeout)
			continue
		}
		b.cfg.Logger.Warn("balancer: declaring a silent node dead", "id", id, "timeout", b.cfg.DeadNodeTimeout)
		var err error
		if rec, err = b.cfg.Manager.Update(ctx, func(r Record) (Record, bool, error) { return r.MarkDead(id) }); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// finishLearnerDrops clears the DropLearners mark of every member that
// holds no learner and has no move in flight, two rounds in a row: a read
// replica turned voter whose learners are all removed, which may take
// voters from now on. (A learner add still running — this balancer's, or
// its predecessor's — puts its learner back within a fraction of a second
// of its removal, so it cannot go unseen two rounds running.)
func (b *Balancer) finishLearnerDrops(ctx context.Context, rec Record, descs []shard.Descriptor) (Record, error) {
	for _, m := range rec.Members {
		free := m.DropLearners && !holdsLearner(descs, m.ID) && !b.moving(m.ID)
		b.mu.Lock()
		seen := b.mu.learnerFree[m.ID]
		b.mu.learnerFree[m.ID] = free
		b.mu.Unlock()
		if !free || !seen {
			continue
		}
		var err error
		if rec, err = b.cfg.Manager.Update(ctx, func(r Record) (Record, bool, error) { return r.LearnersDropped(m.ID) }); err != nil {
			return rec, err
		}
		b.cfg.Logger.Info("balancer: a former read replica's learners are removed; it takes voters", "id", m.ID)
	}
	return rec, nil
}

func holdsLearner(descs []shard.Descriptor, node uint64) bool {
	for _, d := range descs {
		if d.IsLearner(node) {
			return true
		}
	}
	return false
}

func holds(descs []shard.Descriptor, node uint64) bool {
	for _, d := range descs {
		if d.HasReplica(node) {
			return true
		}
	}
	return false
}

func (b *Balancer) moving(node uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, mv := range b.mu.inflight {
		if mv.From == node || mv.To == node {
			return true
		}
	}
	return false
}

// quorumAway reports a shard among descs with id as a voter whose voters
// on nodes neither dead (in rec) nor silent are fewer than a majority.
func quorumAway(descs []shard.Descriptor, rec Record, silent map[uint64]bool, id uint64) (uint64, bool) {
	for _, d := range descs {
		if !d.IsVoter(id) {
			continue
		}
		up := 0
		for _, n := range d.Replicas {
			if m, ok := rec.Member(n); n != id && !silent[n] && (!ok || m.State != Dead) {
				up++
			}
		}
		if up < len(d.Replicas)/2+1 {
			return d.ID, true
		}
	}
	return 0, false
}
