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

// KV is what the Manager needs of the database: a linearizable read and a
// compare-and-set write of one key (the node's coordinator, adapted).
type KV interface {
	// Get returns the value and version of key, or ErrKeyNotFound.
	Get(ctx context.Context, key []byte) (value []byte, version uint64, err error)
	// CompareAndSet writes key=value if its version is version (0: if the
	// key is absent), else returns ErrVersionMismatch and writes nothing.
	CompareAndSet(ctx context.Context, key, value []byte, version uint64) (newVersion uint64, err error)
}

// Errors a KV returns.
var (
	ErrKeyNotFound     = errors.New("cluster: key not found")
	ErrVersionMismatch = errors.New("cluster: version mismatch")
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// NodeID is this node's id.
	NodeID uint64
	// KV reads and writes the record. Required.
	KV KV
	// Replication is the cluster's replication factor (decommissions that
	// would leave fewer active nodes are refused). Required.
	Replication int
	// Descriptors returns the current shard descriptors, sent to a
	// joining node. Required.
	Descriptors func() []shard.Descriptor
	// PollInterval is the time between two reads of the record by Run.
	// Default 1s.
	PollInterval time.Duration
	// ReadTimeout bounds one read or write of the record. Default 2s.
	ReadTimeout time.Duration
	// OnChange is called (from Run or after a change made here) with each
	// record that differs from the last one seen. Optional.
	OnChange func(Record)
	// Fallback, when set, reads the record (and its version) some other
	// way when Run's own read fails — through another node: a node whose
	// routing went stale (cut off, declared dead) still learns the record
	// and so its own removal. Optional.
	Fallback func(ctx context.Context) (Record, uint64, error)
	Logger   *slog.Logger
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c ManagerConfig) EnsureDefaults() ManagerConfig {
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first field of a filled config out of range.
func (c ManagerConfig) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("cluster: ManagerConfig.NodeID is required")
	case c.KV == nil || c.Descriptors == nil:
		return errors.New("cluster: ManagerConfig.KV and Descriptors are required")
	case c.Replication < 1:
		return fmt.Errorf("cluster: Replication %d: want at least 1", c.Replication)
	case c.PollInterval <= 0 || c.ReadTimeout <= 0:
		return errors.New("cluster: PollInterval and ReadTimeout must be positive")
	}
	return nil
}

// Manager reads and changes the membership record.
type Manager struct {
	cfg ManagerConfig
	// notifyMu serializes OnChange calls; notified is the version last
	// given to OnChange (guarded by notifyMu).
	notifyMu sync.Mutex
	notified uint64
	mu       struct {
		sync.Mutex
		rec     Record
		version uint64 // 0: no record seen yet
		read    time.Time
	}
}

// NewManager returns a Manager; it reads nothing until asked.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg}, nil
}

// maxCASTries bounds a change's read–modify–write rounds lost to
// concurrent changes.
const maxCASTries = 20

// Cached returns the last record seen and whether there is one.
func (m *Manager) Cached() (Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.rec.Clone(), m.mu.version != 0
}

// Read reads the record linearizably, caches and returns it. ErrNotReady
// wraps a failed read; an absent record is ErrNotReady too.
func (m *Manager) Read(ctx context.Context) (Record, error) {
	rec, _, err := m.read(ctx)
	return rec, err
}

// ReadVersion is Read with the record's version (it grows with every
// change).
func (m *Manager) ReadVersion(ctx context.Context) (Record, uint64, error) {
	return m.read(ctx)
}

func (m *Manager) read(ctx context.Context) (Record, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
	defer cancel()
	b, ver, err := m.cfg.KV.Get(ctx, []byte(RecordKey))
	if errors.Is(err, ErrKeyNotFound) {
		return Record{}, 0, fmt.Errorf("%w: no membership record yet (the cluster is bootstrapping): %w", ErrNotReady, ErrKeyNotFound)
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("%w: reading the membership record: %w", ErrNotReady, err)
	}
	rec, err := UnmarshalRecord(b)
	if err != nil {
		return Record{}, 0, err
	}
	m.remember(rec, ver)
	return rec, ver, nil
}

// remember caches rec at version ver (if newer) and reports a change.
func (m *Manager) remember(rec Record, ver uint64) {
	m.mu.Lock()
	if ver < m.mu.version {
		m.mu.Unlock()
		return
	}
	m.mu.rec, m.mu.version, m.mu.read = rec.Clone(), ver, time.Now()
	m.mu.Unlock()
	m.notify()
}

// notify gives OnChange the newest record unless it saw it already: calls
// never overlap and never go back to an older version, whatever order
// concurrent reads and changes finish in.
func (m *Manager) notify() {
	if m.cfg.OnChange == nil {
		return
	}
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.mu.Lock()
	rec, ver := m.mu.rec.Clone(), m.mu.version
	m.mu.Unlock()
	if ver == m.notified {
		return
	}
	m.notified = ver
	m.cfg.OnChange(rec)
}

// Bootstrap writes the record of a new cluster from peers unless one
// exists (compare-and-set on absence, so nodes bootstrapping at once agree
// on one record), then returns the record.
func (m *Manager) Bootstrap(ctx context.Context, peers map[uint64]string) (Record, error) {
	rec, err := m.Read(ctx)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, ErrKeyNotFound) {
		return Record{}, err
	}
	rec = Bootstrap(peers)
	wctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
	defer cancel()
	ver, err := m.cfg.KV.CompareAndSet(wctx, []byte(RecordKey), rec.Marshal(), 0)
	if errors.Is(err, ErrVersionMismatch) {
		return m.Read(ctx) // another node wrote it first
	}
	if err != nil {
		return Record{}, fmt.Errorf("%w: writing the membership record: %w", ErrNotReady, err)
	}
	m.cfg.Logger.Info("membership record written", "members", len(rec.Members))
	m.remember(rec, ver)
	return rec, nil
}

// Update applies change to the current record and writes the result with
// compare-and-set, retrying when another change won the race. A change
// that reports changed false writes nothing.
func (m *Manager) Update(ctx context.Context, change func(Record) (Record, bool, error)) (Record, error) {
	for try := 0; try < maxCASTries; try++ {
		rec, ver, err := m.read(ctx)
		if err != nil {
			return Record{}, err
		}
		out, changed, err := change(rec)
		if err != nil || !changed {
			return rec, err
		}
		if err := out.Validate(); err != nil {
			panic(fmt.Sprintf("cluster: a transition broke the record: %v", err))
		}
		wctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
		nv, err := m.cfg.KV.CompareAndSet(wctx, []byte(RecordKey), out.Marshal(), ver)
		cancel()
		if errors.Is(err, ErrVersionMismatch) {
			continue
		}
		if err != nil {
			return Record{}, fmt.Errorf("%w: writing the membership record: %w", ErrNotReady, err)
		}
		m.remember(out, nv)
		return out, nil
	}
	return Record{}, fmt.Errorf("%w: the record kept changing under %d attempts", ErrNotReady, maxCASTries)
}

// JoinRequest is what a joining node sends.
type JoinRequest struct {
	NodeID   uint64 `json:"node_id"`
	HTTPAddr string `json:"http_addr"`
	PeerAddr string `json:"peer_addr"`
	// Role: "" or voter, or read-replica (role.go).
	Role Role `json:"role,omitempty"`
}

// JoinResponse is what the cluster answers a joining node.
type JoinResponse struct {
	Members     []Member           `json:"members"`
	Replication int                `json:"replication"`
	Shards      []shard.Descriptor `json:"shards"`
}

// Join admits a node (or confirms a retried join).
func (m *Manager) Join(ctx context.Context, req JoinRequest) (JoinResponse, error) {
	rec, err := m.Update(ctx, func(r Record) (Record, bool, error) {
		return r.JoinAs(req.NodeID, req.HTTPAddr, req.PeerAddr, req.Role)
	})
	if err != nil {
		return JoinResponse{}, err
	}
	m.cfg.Logger.Info("node joined", "id", req.NodeID, "http", req.HTTPAddr, "peer", req.PeerAddr, "role", req.Role)
	return JoinResponse{Members: rec.Members, Replication: m.cfg.Replication, Shards: m.cfg.Descriptors()}, nil
}

// Decommission marks node id decommissioning.
func (m *Manager) Decommission(ctx context.Context, id uint64) (Member, error) {
	return m.change(ctx, id, func(r Record) (Record, bool, error) { return r.Decommission(id, m.cfg.Replication) })
}

// RemoveDead marks node id dead.
func (m *Manager) RemoveDead(ctx context.Context, id uint64) (Member, error) {
	if id == m.cfg.NodeID {
		return Member{}, fmt.Errorf("%w: node %d cannot declare itself dead; ask another node", ErrInvalid, id)
	}
	return m.change(ctx, id, func(r Record) (Record, bool, error) { return r.MarkDead(id) })
}

// SetRole changes node id's role (role.go): the balancer then moves its
// voters away and gives it learners (read-replica), or the caller removes
// its learners and the balancer gives it voters (voter).
func (m *Manager) SetRole(ctx context.Context, id uint64, role Role) (Member, error) {
	return m.change(ctx, id, func(r Record) (Record, bool, error) { return r.SetRole(id, role, m.cfg.Replication) })
}

// SetSettings changes the cluster-wide settings.
func (m *Manager) SetSettings(ctx context.Context, s Settings) (Settings, error) {
	rec, err := m.Update(ctx, func(r Record) (Record, bool, error) { return r.WithSettings(s) })
	return rec.Settings, err
}

// PauseRebalancing stops rebalancing moves cluster-wide until until (it
// never shortens a pause): a replica moved by hand is not moved back at
// once by whichever node balances.
func (m *Manager) PauseRebalancing(ctx context.Context, until time.Time) error {
	_, err := m.Update(ctx, func(r Record) (Record, bool, error) {
		if until.UnixNano() <= r.PausedUntil {
			return r, false, nil
		}
		out := r.Clone()
		out.PausedUntil = until.UnixNano()
		return out, true, nil
	})
	return err
}

// Register tells the cluster this node's addresses (at every start).
func (m *Manager) Register(ctx context.Context, httpAddr, peerAddr string) (Record, error) {
	return m.Update(ctx, func(r Record) (Record, bool, error) {
		return r.SetAddrs(m.cfg.NodeID, httpAddr, peerAddr)
	})
}

func (m *Manager) change(ctx context.Context, id uint64, f func(Record) (Record, bool, error)) (Member, error) {
	rec, err := m.Update(ctx, f)
	if err != nil {
		return Member{}, err
	}
	mem, _ := rec.Member(id)
	m.cfg.Logger.Info("membership changed", "id", id, "state", mem.State)
	return mem, nil
}

// Run reads the record every PollInterval until ctx ends (OnChange sees
// each new one), through Fallback when its own read fails. A failed read
// is logged at most once a minute.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.PollInterval)
	defer t.Stop()
	var lastLog time.Time
	for {
		_, err := m.Read(ctx)
		if err != nil && m.cfg.Fallback != nil && ctx.Err() == nil {
			fctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
			rec, ver, ferr := m.cfg.Fallback(fctx)
			cancel()
			if ferr == nil && rec.Validate() == nil {
				m.remember(rec, ver)
				err = nil
			}
		}
		if err != nil && ctx.Err() == nil && time.Since(lastLog) > time.Minute {
			m.cfg.Logger.Warn("reading the membership record", "err", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
