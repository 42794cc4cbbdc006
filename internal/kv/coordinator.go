package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/faultclock"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// Config of a Coordinator.
type Config struct {
	NodeID   uint64
	HTTPAddr string
	PeerAddr string
	// Peers maps node id to peer address.
	Peers       map[uint64]string
	Replication int
	Map         shard.Map
	Store       *store.Store
	Transport   transport.Transport
	// Engine is the node's storage engine, which ordered scans (listing,
	// index queries) and HEAD read directly: their derived indexes are
	// node-global, not any one replica's. Nil: this node answers scans
	// and HEAD with an error.
	Engine *storage.Engine
	// DefaultTimeout applies when a request's context has no deadline.
	// Default 5s.
	DefaultTimeout time.Duration
	// RetryWindow bounds a write's time, all its attempts under one
	// request id included: a write whose deadline is later gives up (504)
	// when it has passed. Default and maximum MaxRetryWindow.
	RetryWindow time.Duration
	Version     string
	Logger      *slog.Logger
	// Clock is the node's wall clock where it hands a time to another
	// node or keeps one (request ids, forwarded deadlines); nil (the
	// default): the real clock. Fault injection shifts it.
	Clock *faultclock.Clock
	// Disk, if set, is the node's disk guard: puts are refused (ErrDiskFull,
	// ErrQuotaExceeded) while it reports a reason; nil: never.
	Disk func() DiskState
	// ShardSoftLimit bounds the requests one shard may have queued on
	// this node (softlimit.go): past it, requests for that shard get
	// ErrShardOverloaded (HTTP 503) at once. 0 (the default): no bound
	// but the node's; cairn serve sets --shard-soft-limit.
	ShardSoftLimit int
}

// Coordinator routes operations to shard leaders.
type Coordinator struct {
	cfg     Config
	started time.Time
	// lastID is the time part of the last request id this node made.
	lastID atomic.Int64
	// refused counts requests refused for a wrong shard (handle.go).
	refused atomic.Uint64
	// queues: shard id -> *shardQueue (softlimit.go).
	queues sync.Map
	// readReplica: this node's role is read-replica; learnerReads counts
	// reads served by local learners; lags: the learners' lag
	// (replica_role.go, replica_lag.go).
	readReplica  atomic.Bool
	learnerReads atomic.Uint64
	lags         lagTable

	mu struct {
		sync.Mutex
		leaders map[uint64]uint64 // shard -> last known leader (remote shards)
		// httpAddrs: node -> HTTP address it last reported (Cluster).
		httpAddrs map[uint64]string
		// peers and states: the members and their states (SetMembers);
		// peers starts as Config.Peers.
		peers  map[uint64]string
		states map[uint64]string
		roles  map[uint64]string
	}
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = 5 * time.Second
	}
	if c.RetryWindow == 0 {
		c.RetryWindow = MaxRetryWindow
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
		return errors.New("kv: Config.NodeID is required")
	case c.Replication < 1:
		return fmt.Errorf("kv: Replication %d: want at least 1", c.Replication)
	case len(c.Map.Shards) == 0:
		return errors.New("kv: Config.Map has no shard")
	case c.DefaultTimeout < 0:
		return fmt.Errorf("kv: DefaultTimeout %s: want a positive duration", c.DefaultTimeout)
	case c.ShardSoftLimit < 0:
		return fmt.Errorf("kv: ShardSoftLimit %d: want 0 (off) or more", c.ShardSoftLimit)
	case c.RetryWindow < 0 || c.RetryWindow > MaxRetryWindow:
		return fmt.Errorf("kv: RetryWindow %s: want at most %s (kept inside the dedup retention)", c.RetryWindow, MaxRetryWindow)
	}
	return nil
}

// New returns a coordinator.
func New(cfg Config) (*Coordinator, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, started: time.Now()}
	c.mu.leaders = map[uint64]uint64{}
	c.mu.httpAddrs = map[uint64]string{}
	c.mu.peers = cfg.Peers
	return c, nil
}

// ReplicationFactor is the cluster's replication factor.
func (c *Coordinator) ReplicationFactor() int { return c.cfg.Replication }

func (c *Coordinator) majority() int { return c.cfg.Replication/2 + 1 }

// ackFrom validates and defaults replicas=ACK/FROM.
func (c *Coordinator) ackFrom(ack, from int) (int, int, error) {
	rf := c.cfg.Replication
	if ack == 0 && from == 0 {
		return c.majority(), rf, nil
	}
	if ack < 1 || ack > from || from > rf {
		return 0, 0, fmt.Errorf("%w: replicas %d/%d: need 1 <= ack <= from <= %d", ErrInvalidArgument, ack, from, rf)
	}
	return ack, from, nil
}

// MaxRetryWindow is the longest a coordinator retries one write (one
// request id). A shard keeps a write's dedup record at least
// statemachine.MinRetention (105 s with the default 2-minute DedupTTL)
// after the write's first attempt; the coordinator's window plus the Go
// client's (client.MaxWriteRetryWindow, also 30 s) stay well inside it,
// so every retry they make is answered from the record, never applied a
// second time.
const MaxRetryWindow = 30 * time.Second

// writeDeadline is withDeadline, no later than RetryWindow from now.
func (c *Coordinator) writeDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := time.Now().Add(c.cfg.RetryWindow)
	if dl, ok := ctx.Deadline(); ok && dl.Before(limit) {
		return ctx, func() {}
	}
	if _, ok := ctx.Deadline(); !ok && c.cfg.DefaultTimeout < c.cfg.RetryWindow {
		return context.WithTimeout(ctx, c.cfg.DefaultTimeout)
	}
	return context.WithDeadline(ctx, limit)
}

func (c *Coordinator) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.DefaultTimeout)
}

// Get reads key.
func (c *Coordinator) Get(ctx context.Context, key []byte, opts ReadOptions) (Value, error) {
	ack, _, err := c.ackFrom(opts.Ack, opts.From)
	if err != nil {
		return Value{}, err
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	d := c.route(key)
	q, err := c.admit(d.ID)
	if err != nil {
		return Value{}, err
	}
	defer q.leave()
	serializable := opts.Consistency == Serializable || ack < c.majority()
	req := &wire.Request{Kind: wire.KindRead, Sender: c.cfg.NodeID, ShardID: d.ID, Epoch: d.Epoch, Ack: uint32(ack), Key: key}
	if serializable {
		req.Kind = wire.KindReadLocal
		// A replica a move created and has not filled yet (applied
		// index 0) holds nothing to serve.
		// Nor does one not yet compared with its peers (docs/scrub.md).
		r := c.cfg.Store.Replica(d.ID)
		local := r != nil && r.Applied() > 0 && r.Verified()
		first := c.shortestQueue(d, local, time.Now())
		if local && c.servesLocally(r) {
			first = c.cfg.NodeID
		}
		if local && first == c.cfg.NodeID {
			v, err := c.readLocal(r, key)
			switch {
			case errors.Is(err, replica.ErrStopped) && r.Removed():
				// A move took the replica away meanwhile: read another.
			case errors.Is(err, statemachine.ErrWrongShard):
				// The shard split since it was routed: the owner now.
				d = c.route(key)
				req.ShardID, req.Epoch = d.ID, d.Epoch
				if r := c.cfg.Store.Replica(d.ID); r != nil && r.Applied() > 0 && r.Verified() {
					v, err := c.readLocal(r, key)
					if !errors.Is(err, statemachine.ErrWrongShard) && !(errors.Is(err, replica.ErrStopped) && r.Removed()) {
						return v, err
					}
				}
			default:
				return v, err
			}
			first = 0
		}
		return c.decodeRead(c.anyReplica(ctx, d, req, first))
	}
	return c.decodeRead(c.onLeader(ctx, d, req))
}

func (c *Coordinator) decodeRead(resp *wire.Response, err error) (Value, error) {
	if err != nil {
		return Value{}, err
	}
	if err := statusErr(resp); err != nil {
		return Value{Revision: resp.Index}, err
	}
	return Value{Data: resp.Value, Version: resp.Version, Index: resp.Terms, Revision: resp.Index}, nil
}

// readLocal reads key from the local replica r's applied state. The
// applied index is taken before the read: the state read holds at least
// what it covers (Value.Revision).
func readLocal(r *replica.Replica, key []byte) (Value, error) {
	applied := r.Applied()
	data, version, err := r.Get(key)
	if errors.Is(err, replica.ErrNotFound) {
		return Value{Revision: applied}, ErrNotFound
	}
	if err != nil {
		return Value{}, err
	}
	return Value{Data: data, Version: version, Revision: applied}, nil
}

// Put writes key=value.
func (c *Coordinator) Put(ctx context.Context, key, value []byte, opts WriteOptions) (uint64, bool, error) {
	resp, err := c.write(ctx, wire.OpPut, key, value, opts)
	if err != nil {
		return 0, false, err
	}
	return resp.Version, resp.Created, nil
}

// Delete removes key and returns the delete's version (its log index).
// For an absent key it returns ErrNotFound and still the log index of
// the delete, which was applied and changed nothing (0 when unknown: an
// older node answered): every later change of the key has a higher
// version, so a watch from it + 1 misses none.
func (c *Coordinator) Delete(ctx context.Context, key []byte, opts WriteOptions) (uint64, error) {
	resp, err := c.write(ctx, wire.OpDelete, key, nil, opts)
	if errors.Is(err, ErrNotFound) && resp != nil {
		return resp.Index, err
	}
	if err != nil {
		return 0, err
	}
	return resp.Version, nil
}

func (c *Coordinator) write(ctx context.Context, op wire.Op, key, value []byte, opts WriteOptions) (*wire.Response, error) {
	ack, _, err := c.ackFrom(opts.Ack, opts.From)
	if err != nil {
		return nil, err
	}
	if op == wire.OpPut {
		if err := c.admitPut(); err != nil {
			return nil, err
		}
	}
	if len(opts.RequestID) > wire.MaxRequestID {
		return nil, fmt.Errorf("%w: request id over %d bytes", ErrInvalidArgument, wire.MaxRequestID)
	}
	ctx, cancel := c.writeDeadline(ctx)
	defer cancel()
	cmd := wire.Command{RequestID: opts.RequestID, Op: op, Key: key, Value: value}
	if len(opts.Index) > 0 {
		if op != wire.OpPut {
			return nil, fmt.Errorf("%w: index terms on a delete", ErrInvalidArgument)
		}
		if cmd.Index, err = wire.NormalizeIndex(opts.Index); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
	}
	if len(cmd.RequestID) == 0 {
		cmd.RequestID = c.newRequestID(c.cfg.Clock.Now().UnixNano())
	}
	switch opts.Cond {
	case CondIfMatch:
		cmd.Cond, cmd.Version = wire.CondIfMatch, opts.Version
	case CondIfAbsent:
		cmd.Cond = wire.CondIfAbsent
	}
	d := c.route(key)
	q, err := c.admit(d.ID)
	if err != nil {
		return nil, err
	}
	defer q.leave()
	req := &wire.Request{Kind: wire.KindWrite, Sender: c.cfg.NodeID, ShardID: d.ID, Epoch: d.Epoch, Ack: uint32(ack), Key: key, Command: cmd.Marshal(), Decoded: &cmd}
	resp, err := c.onLeader(ctx, d, req)
	if err != nil {
		return nil, err
	}
	return resp, statusErr(resp)
}

// newRequestID returns a fresh id for a write whose client gave none: a
// strictly increasing time in nanoseconds (big-endian) and 8 random bytes.
// Ids need to be unique, not secret; ordered by time, the dedup records of
// an apply round land together at the end of their bucket, where Pebble
// inserts them into its memtable in a step each instead of a search each.
func (c *Coordinator) newRequestID(now int64) []byte {
	for {
		last := c.lastID.Load()
		t := max(now, last+1)
		if c.lastID.CompareAndSwap(last, t) {
			id := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(t))
			return binary.LittleEndian.AppendUint64(id, rand.Uint64())
		}
	}
}

// statusErr maps a final response status to a sentinel error.
func statusErr(resp *wire.Response) error {
	switch resp.Status {
	case wire.StatusOK:
		return nil
	case wire.StatusNotFound:
		return ErrNotFound
	case wire.StatusPreconditionFailed:
		return ErrPreconditionFailed
	case wire.StatusRequestIDReused:
		return ErrRequestIDReused
	case wire.StatusAckTimeout:
		return fmt.Errorf("%w: %s", ErrAckTimeout, resp.Message)
	case wire.StatusTimeout:
		return fmt.Errorf("%w: %s", ErrTimeout, resp.Message)
	case wire.StatusOverloaded:
		if resp.Message != "" {
			return fmt.Errorf("%w: %s", ErrOverloaded, resp.Message)
		}
		return ErrOverloaded
	case wire.StatusStopping:
		return ErrStopped
	case wire.StatusInvalid:
		return fmt.Errorf("%w: %s", ErrInvalidArgument, resp.Message)
	case wire.StatusWrongShard:
		return fmt.Errorf("%w: %s", ErrWrongShard, resp.Message)
	default:
		return fmt.Errorf("kv: remote error (status %d): %s", resp.Status, resp.Message)
	}
}
