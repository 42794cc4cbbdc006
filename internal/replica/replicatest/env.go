package replicatest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing/synctest"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// Errors returned by the harness.
var (
	ErrUnknownNode = errors.New("replicatest: unknown node")
	ErrBadCommand  = errors.New("replicatest: bad command")
	ErrStaged      = errors.New("replicatest: node has a staged round")
)

// ShardID is the id of the one shard every node replicates.
const ShardID = 1

// Options configure an Env.
type Options struct {
	// Seed seeds every randomized choice of the harness (message
	// reordering, partial crashes). Same seed, same script: same trace.
	Seed uint64
	// Logger receives the replicas' logs. Default: discarded.
	Logger *slog.Logger
}

// Env is a deterministic cluster of replicas of one shard. It runs no
// goroutine of its own: every Ready round, delivery and tick happens
// inside a method call. It must be used inside a synctest bubble
// (synctest.Test): proposals and reads block in goroutines, and the
// harness waits with synctest.Wait until each has either returned or
// is blocked for good before it prints what changed.
type Env struct {
	opts Options
	rng  *rand.Rand
	// mono is the manual monotonic clock every node reads (plus its own
	// skew) as replica Config.Clock: leaders stamp entries with it.
	mono  time.Duration
	nodes map[uint64]*Node
	ids   []uint64
	desc  shard.Descriptor
	cfg   nodeConfig
	net   network
	ops   []*Op
	// streams: snapshots being received (snap.go).
	streams []*stream
	lines   []string
	indent  string
	acked   map[string]uint64 // key: highest version acknowledged
	viol    []string
	// panicked: a command panicked; the environment does nothing more.
	panicked bool
}

// New returns an empty environment.
func New(opts Options) *Env {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Env{
		opts:  opts,
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		nodes: map[uint64]*Node{},
		net:   network{cut: map[[2]uint64]bool{}},
		acked: map[string]uint64{},
	}
}

// Seed is the environment's seed.
func (e *Env) Seed() uint64 { return e.opts.Seed }

// Now is the manual monotonic clock: the time since the environment
// started, as every node without a skew reads it.
func (e *Env) Now() time.Duration { return e.mono }

// Advance moves the manual clock on by d.
func (e *Env) Advance(d time.Duration) { e.mono += d }

// SetSkew makes node id's clock read d ahead of the manual clock (behind
// if negative) from now on.
func (e *Env) SetSkew(id uint64, d time.Duration) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	nd.skew = d
	return nil
}

// Node returns node id, or nil.
func (e *Env) Node(id uint64) *Node { return e.nodes[id] }

// Violations lists the broken invariants seen so far (a message sent
// before the state it acknowledges was durable, a stale read).
func (e *Env) Violations() []string { return slices.Clone(e.viol) }

func (e *Env) violation(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.viol = append(e.viol, s)
	e.printf("VIOLATION: %s", s)
}

// printf adds one line to the output of the current command.
func (e *Env) printf(format string, args ...any) {
	e.lines = append(e.lines, e.indent+fmt.Sprintf(format, args...))
}

// takeOutput returns and clears the output collected so far.
func (e *Env) takeOutput() string {
	s := strings.Join(e.lines, "\n")
	e.lines = e.lines[:0]
	if s == "" {
		return "ok"
	}
	return s
}

// settle waits until every goroutine blocked in a proposal or read has
// either returned or is blocked for good, then prints the operations that
// finished, in the order they were issued.
func (e *Env) settle() {
	synctest.Wait()
	e.settleStreams()
	for _, op := range e.ops {
		op.mu.Lock()
		done, reported := op.done, op.reported
		op.reported = op.done
		op.mu.Unlock()
		if done && !reported {
			e.reportOp(op)
		}
	}
}

// Close stops every replica and closes every engine. Operations still
// pending fail with replica.ErrStopped.
func (e *Env) Close() {
	for _, id := range e.ids {
		e.nodes[id].close()
	}
	e.settle()
	e.lines = e.lines[:0]
}

// AddNodes bootstraps n new voters of the shard (ids 1..n).
func (e *Env) AddNodes(n int, cfg nodeConfig) error {
	if len(e.nodes) > 0 {
		return fmt.Errorf("%w: nodes exist already", ErrBadCommand)
	}
	e.cfg = cfg
	e.desc = shard.Descriptor{ID: ShardID, Epoch: 1}
	for i := 1; i <= n; i++ {
		e.desc.Replicas = append(e.desc.Replicas, uint64(i))
	}
	for i := 1; i <= n; i++ {
		nd := &Node{ID: uint64(i), env: e}
		if err := nd.open(true); err != nil {
			return err
		}
		e.nodes[nd.ID] = nd
		e.ids = append(e.ids, nd.ID)
		nd.last = nd.statusLine()
		e.printf("%s", nd.last)
	}
	return nil
}

func (e *Env) node(id uint64) (*Node, error) {
	nd := e.nodes[id]
	if nd == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	return nd, nil
}

// replicaConfig is the replica configuration of node nd.
func (e *Env) replicaConfig(nd *Node) replica.Config {
	return replica.Config{
		NodeID:            nd.ID,
		Desc:              e.desc,
		Engine:            nd.Engine,
		Send:              nd.sender(),
		Enqueue:           func(uint64) {},
		ElectionTick:      e.cfg.ElectionTick,
		HeartbeatTick:     e.cfg.HeartbeatTick,
		TruncateThreshold: e.cfg.TruncateThreshold,
		TruncateKeep:      e.cfg.TruncateKeep,
		TruncateBytes:     e.cfg.TruncateBytes,
		CutPastDown:       e.cfg.CutPastDown,
		DedupTTL:          e.cfg.DedupTTL,
		Clock:             func() time.Duration { return e.mono + nd.skew },
		LeaseDuration:     e.cfg.LeaseDuration,
		LeaseClock:        func() time.Duration { return e.mono },
		Logger:            e.opts.Logger.With("node", nd.ID),
	}
}
