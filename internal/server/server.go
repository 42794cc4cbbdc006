package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/api/auth"
	etcdapi "github.com/cairn-db/cairn/internal/api/etcd"
	httpapi "github.com/cairn-db/cairn/internal/api/http"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/faultclock"
	"github.com/cairn-db/cairn/internal/http1"
	"github.com/cairn-db/cairn/internal/http2"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/security"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Config of one node.
type Config struct {
	NodeID   uint64
	HTTPAddr string
	PeerAddr string
	// InitialCluster maps every node id to its peer address.
	InitialCluster map[uint64]string
	DataDir        string
	// Shards and Replication apply when the cluster is bootstrapped.
	// Shards 0: one per node of InitialCluster.
	Shards      int
	Replication int
	// RequestTimeout is the default deadline of a client request.
	RequestTimeout time.Duration
	MaxKeySize     int
	MaxValueSize   int
	MaxInflight    int
	// MaxConns bounds the HTTP/1 client connections served at once (503
	// and close beyond), and apart from them the etcd API's (closed
	// beyond). 0: 4096 (internal/http1's default, and the etcd API's).
	MaxConns int
	// TickInterval is one raft tick (election timeout = 10 ticks).
	TickInterval time.Duration
	// LeaseReads: leaders answer linearizable reads without a quorum
	// round while they hold a lease (docs/architecture.md, "Leader leases").
	LeaseReads bool
	// ScrubInterval: how often every shard's replicas hash and compare
	// their data and the node verifies its sstable checksums
	// (docs/scrub.md). 0: no scrubbing.
	ScrubInterval time.Duration
	// UnsafeNoSync disables fsync: acknowledged writes can be lost.
	UnsafeNoSync bool
	// GroupCommitDelay and GroupCommitWrites: while many writes wait on
	// this node, its WAL syncs at most once per a delay, so one fsync
	// covers more writes (as PostgreSQL's commit_delay with
	// commit_siblings). The delay is GroupCommitDelay times the waiting
	// writes over GroupCommitWrites, at most GroupCommitDelay, and none
	// below a quarter of GroupCommitWrites: a write waits for the sync
	// only a small part of what it waits in line anyway. Zero disables it.
	// Defaults (cairn serve): 3ms, 256.
	GroupCommitDelay  time.Duration
	GroupCommitWrites int
	// CacheSize is the bytes of Pebble's block cache (0: the storage
	// default).
	CacheSize int64
	// ValueSeparation is the smallest value kept in Pebble's blob files
	// (storage.Options.ValueSeparation; 0: the storage default, negative:
	// none).
	ValueSeparation int
	// EtcdAddr is where the etcd v3 gRPC API listens; "" turns it off.
	EtcdAddr string
	// EtcdAddrOptional: when EtcdAddr cannot be listened on, warn and run
	// without the etcd API instead of failing (for a default address).
	EtcdAddrOptional bool
	// FaultInjection enables the admin fault hook (partitions, disk
	// stalls) used by `cairn chaos`. Never on in production.
	FaultInjection bool
	Version        string
	Logger         *slog.Logger
	// TuneRuntime applies the node's process-wide runtime settings (GC
	// percent, a soft memory limit that follows the cgroup's; memlimit.go).
	// Set by `cairn serve`; off for tests that host nodes in one process.
	TuneRuntime bool
	// DiskReserveBytes: below this much free space on the data
	// directory's filesystem the node refuses new values (HTTP 507
	// disk_full). 0: DefaultDiskReserve; negative: no free-space check.
	DiskReserveBytes int64
	// QuotaBytes: past this much disk usage of the storage engine the
	// node refuses new values (HTTP 507 quota_exceeded). 0: no quota.
	QuotaBytes int64
	// SplitSize: a shard whose data on disk passes this many bytes is
	// split in two halves by its leader (docs/split.md). 0: the store's
	// default (256 MiB); negative: no automatic split.
	SplitSize int64
	// SplitLoad: a shard whose log grows by more than this many entries
	// per second for three checks in a row (30 s apart) is split too. 0:
	// never for load.
	SplitLoad float64
	// Replica tuning (tests use small truncation thresholds).
	Replica replica.Config
	// TLS of the client port (tls.go): certificate and key, and the CA
	// that ClientAuth verifies client certificates against. Empty: plain
	// HTTP.
	TLS        security.Files
	ClientAuth security.ClientAuth
	// PeerTLS: mutual TLS between nodes; all three files or none.
	PeerTLS security.Files
	// Auth requires bearer tokens with roles on the client port (auth.go).
	Auth bool
	// Join lists base URLs of running nodes: a node with no data joins
	// their cluster through the first that answers instead of
	// bootstrapping from InitialCluster (members.go).
	Join []string
	// Role is the role a joining node asks for: "" or voter, or
	// read-replica (role.go). Read at the join only.
	Role string
	// MembersPoll is how often the node reads the membership record.
	// Default 1s.
	MembersPoll time.Duration
	// DeadNodeTimeout: a member silent this long is declared dead by the
	// balancer. Default 5m; negative disables.
	DeadNodeTimeout time.Duration
	// WatchHistory: log indexes per shard whose changes are kept for etcd
	// watches (replica.Config.HistoryRetention); the same on every node.
	// 0: the default (20,000); negative: no history.
	WatchHistory int
	// WatchHistoryBytes bounds that history in bytes per shard
	// (replica.Config.HistoryBytes); the same on every node. 0: the
	// default (64 MiB); negative: no bound but WatchHistory.
	WatchHistoryBytes int64
	// TransferLimit bounds the replica moves touching one node at once
	// (until PUT /v1/admin/settings sets one). Default 2.
	TransferLimit int
	// SnapshotRate bounds snapshot streaming in bytes/s (0: unlimited),
	// until PUT /v1/admin/settings sets one; Server.SnapshotRate.
	SnapshotRate int64
	// ShardSoftLimit bounds the requests one shard may have queued on
	// this node; past it they get 503 shard_overloaded at once
	// (kv.Config.ShardSoftLimit). 0: no per-shard bound (the default
	// here; cairn serve's --shard-soft-limit defaults to
	// DefaultShardSoftLimit).
	ShardSoftLimit int
}

// ParseCluster parses "1=host:port,2=host:port".
func ParseCluster(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 || addr == "" {
			return nil, fmt.Errorf("server: bad --initial-cluster entry %q (want id=host:port, id > 0)", part)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("server: node id %d twice in --initial-cluster", n)
		}
		out[n] = addr
	}
	if len(out) == 0 {
		return nil, errors.New("server: --initial-cluster is empty")
	}
	return out, nil
}

// Server is one running node.
type Server struct {
	cfg   Config
	eng   *storage.Engine
	store *store.Store
	// pendingWrites counts the writes proposed on this node's replicas
	// that wait for their answer (replica.Config.PendingWrites); the
	// engine's sync delay reads it from the moment the engine opens.
	pendingWrites atomic.Int64
	tr            *transport.GRPC
	coord         *kv.Coordinator
	http          *http1.Server
	lis           net.Listener
	fresh         bool
	log           *slog.Logger
	faulty        *transport.Faulty
	etcd          *etcdapi.Server
	etcdLis       net.Listener
	// clock is the node's clock, shifted only by clock faults.
	clock *faultclock.Clock
	// disk decides whether the node takes new values (diskguard.go).
	disk *diskGuard
	// bg runs the runtime tuning goroutine (TuneRuntime).
	// stopping ends when Stop begins: long API runs (profiles, traces)
	// end with it.
	stopping   context.Context
	beginsStop context.CancelFunc
	// authn checks tokens (Config.Auth); authDone ends with the
	// bootstrap of the first admin token (nil: none runs).
	authn        *auth.Authenticator
	authCounters auth.Counters
	authDone     chan struct{}
	peers        map[uint64]string

	// Membership (members.go): the record's manager and the balancer,
	// run under bg until bgCancel.
	nodeTr      transport.Transport
	members     *cluster.Manager
	balancer    *cluster.Balancer
	bg          sync.WaitGroup
	bgCtx       context.Context
	bgCancel    context.CancelFunc
	idMu        sync.Mutex
	identity    identity
	removed     chan struct{}
	removedOnce sync.Once
	// refused gets the cluster's refusal of this node's addresses
	// (registerSelf); buffered, sent at most once.
	refused  chan error
	roleWarn sync.Once // role.go
	// snapshotRate is the snapshot rate in force, bytes/s (0: unlimited).
	snapshotRate atomic.Int64
	// fallbackNext rotates readThroughPeer's first member.
	fallbackNext atomic.Uint64
	// began: when New was called; the startup phases are logged from it.
	began time.Time
}

// faults is the node's fault hook for the admin API.
type faults struct{ s *Server }

func (f faults) Partition(nodes []uint64) {
	f.s.log.Warn("fault injection: partition", "blocked", nodes)
	f.s.faulty.Block(nodes)
}

func (f faults) ClockOffset(d time.Duration, jump bool) {
	if jump {
		f.s.clock.Jump(d)
	} else {
		f.s.clock.Skew(d)
	}
	f.s.log.Warn("fault injection: clock", "jump", jump, "by", d, "offset", f.s.clock.Offset())
}

func (f faults) DiskFull(on bool) {
	f.s.log.Warn("fault injection: disk full", "on", on)
	if f.s.disk.Inject(on).Refusing != "" {
		f.s.handLeadershipsAway("disk full (injected)")
	}
}

func (f faults) DiskStall(d time.Duration) {
	f.s.log.Warn("fault injection: disk stall", "delay", d)
	f.s.eng.SetCommitDelay(d)
}

// EnsureDefaults returns c with its zero fields set to their defaults.
// The limits and timings left at zero take their components' defaults
// (internal/api/http, internal/store, internal/storage).
func (c Config) EnsureDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DiskReserveBytes == 0 {
		c.DiskReserveBytes = DefaultDiskReserve
	}
	if c.GroupCommitDelay > 0 && c.GroupCommitWrites == 0 {
		c.GroupCommitWrites = 256
	}
	if c.MembersPoll == 0 {
		c.MembersPoll = time.Second
	}
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = 5 * time.Minute
	}
	if c.TransferLimit == 0 {
		c.TransferLimit = 2
	}
	return c
}

// Validate reports the first field of a filled Config out of range.
func (c Config) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("server: the node id is required (a positive integer)")
	case c.DataDir == "":
		return errors.New("server: a data dir is required")
	case c.HTTPAddr == "":
		return errors.New("server: an HTTP address is required")
	case c.Replication < 1:
		return fmt.Errorf("server: replication %d: want at least 1", c.Replication)
	case c.Shards < 0:
		return fmt.Errorf("server: shards %d: want 0 (one per node) or more", c.Shards)
	case c.RequestTimeout < 0 || c.TickInterval < 0 || c.GroupCommitDelay < 0 || c.ScrubInterval < 0:
		return errors.New("server: request timeout, tick and group commit delay cannot be negative")
	case c.QuotaBytes < 0:
		return errors.New("server: quota bytes cannot be negative (0: no quota)")
	case len(c.Join) > 0 && checkJoinAddr("--http-addr", c.HTTPAddr) != nil:
		return checkJoinAddr("--http-addr", c.HTTPAddr)
	case len(c.Join) > 0 && checkJoinAddr("--peer-addr", c.PeerAddr) != nil:
		return checkJoinAddr("--peer-addr", c.PeerAddr)
	case c.MembersPoll < 0 || c.TransferLimit < 0 || c.SnapshotRate < 0:
		return errors.New("server: members poll, transfer limit and snapshot rate cannot be negative")
	case c.ShardSoftLimit < 0:
		return fmt.Errorf("server: shard soft limit %d: want 0 (off) or more", c.ShardSoftLimit)
	case c.checkRoleFlag() != nil:
		return c.checkRoleFlag()
	case c.MaxKeySize < 0 || c.MaxValueSize < 0 || c.MaxInflight < 0 || c.MaxConns < 0 || c.CacheSize < 0 || c.GroupCommitWrites < 0:
		return errors.New("server: key and value limits, in-flight bound, cache size and group commit writes cannot be negative")
	case c.MaxKeySize+c.MaxValueSize > maxEntryData:
		// A larger entry would commit on no follower: the shard would
		// take no write after it.
		return fmt.Errorf("server: --max-key-size plus --max-value-size is %d bytes: want at most %d (what one peer message carries, less room for index terms and framing)",
			c.MaxKeySize+c.MaxValueSize, maxEntryData)
	}
	return c.validateTLS()
}

// maxEntryData bounds a write's key and value together: a peer message
// (transport.MaxMessage) less 8 MiB for the rest of the command (index
// terms, request id) and the raft and transport framing.
const maxEntryData = transport.MaxMessage - 8<<20

// New opens the node's data and builds every component; Start serves.
func New(cfg Config) (*Server, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("node", cfg.NodeID)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	s := &Server{cfg: cfg, log: log, removed: make(chan struct{}), refused: make(chan error, 1), began: time.Now()}
	s.stopping, s.beginsStop = context.WithCancel(context.Background())
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.snapshotRate.Store(cfg.SnapshotRate)
	opts := storage.Options{UnsafeNoSync: cfg.UnsafeNoSync, CacheSize: cfg.CacheSize, ValueSeparation: cfg.ValueSeparation}
	if cfg.TuneRuntime {
		// One node per process: its memtables fit the process's memory
		// limit (memlimit.go).
		opts.MemTableSize = memTableSize(cgroupLimit())
	}
	if cfg.GroupCommitDelay > 0 {
		opts.SyncDelay = s.syncDelay
	}
	eng, err := storage.Open(cfg.DataDir, opts)
	if err != nil {
		return nil, err
	}
	s.log.Info("startup: opened the storage engine", "took", time.Since(s.began).Round(time.Microsecond).String())
	s.eng = eng
	s.disk = newDiskGuard(cfg.DataDir, uint64(max(cfg.DiskReserveBytes, 0)), uint64(cfg.QuotaBytes), eng.DiskUsage, log)
	s.disk.check()
	if err := s.build(); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

// syncDelay is the engine's least time between WAL syncs: the group
// commit delay while enough writes wait, else none.
func (s *Server) syncDelay() time.Duration {
	return groupCommitDelay(s.pendingWrites.Load(), s.cfg.GroupCommitDelay, s.cfg.GroupCommitWrites)
}

// groupCommitDelay: see Config.GroupCommitDelay.
func groupCommitDelay(pending int64, delay time.Duration, full int) time.Duration {
	n := int64(max(full, 1))
	switch {
	case pending < n/4:
		return 0
	case pending >= n:
		return delay
	}
	return time.Duration(int64(delay) * pending / n)
}

func (s *Server) build() error {
	cfg := s.cfg
	id, found, err := loadIdentity(s.eng)
	if err != nil {
		return err
	}
	bootstrap := true // the store may create replicas' initial state
	switch {
	case found && id.Removed:
		return removedError(id.NodeID)
	case !found && len(cfg.Join) > 0:
		if id, err = s.join(); err != nil {
			return err
		}
		s.fresh, bootstrap = true, false
	case !found:
		if cfg.Role == string(cluster.ReadReplica) {
			return errReadReplicaBootstrap
		}
		if _, ok := cfg.InitialCluster[cfg.NodeID]; !ok {
			return fmt.Errorf("server: node id %d is not in --initial-cluster", cfg.NodeID)
		}
		ids := make([]uint64, 0, len(cfg.InitialCluster))
		for n := range cfg.InitialCluster {
			ids = append(ids, n)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		n := cfg.Shards
		if n == 0 {
			n = len(ids)
		}
		m, err := shard.Bootstrap(ids, n, cfg.Replication)
		if err != nil {
			return err
		}
		id = identity{NodeID: cfg.NodeID, Replication: cfg.Replication, Peers: cfg.InitialCluster, Map: m}
		s.fresh = true
	default:
		s.warnConflicts(id)
		if len(cfg.Join) > 0 {
			s.log.Info("ignoring --join: the data dir already belongs to a cluster member")
		}
	}
	s.identity = id
	if cfg.PeerAddr == "" {
		// A restart without --peer-addr listens where the cluster knows
		// this node.
		cfg.PeerAddr = id.Peers[id.NodeID]
		s.cfg.PeerAddr = cfg.PeerAddr
	}
	if err := id.Map.Validate(); err != nil {
		return err
	}
	rc := cfg.Replica
	rc.PendingWrites = &s.pendingWrites
	if cfg.WatchHistory != 0 {
		rc.HistoryRetention = cfg.WatchHistory
	}
	if cfg.WatchHistoryBytes != 0 {
		rc.HistoryBytes = cfg.WatchHistoryBytes
	}
	if cfg.FaultInjection && rc.Clock == nil {
		s.clock = faultclock.New()
		rc.Clock = s.clock.Monotonic
	}
	st, err := store.New(store.Config{
		NodeID: id.NodeID, Engine: s.eng, Map: id.Map, TickInterval: cfg.TickInterval, LeaseReads: cfg.LeaseReads,
		ScrubInterval: cfg.ScrubInterval, SplitSize: cfg.SplitSize, SplitLoad: cfg.SplitLoad, Replica: rc, Logger: s.log,
	}, s.fresh && bootstrap)
	if err != nil {
		return err
	}
	s.store = st
	if s.fresh {
		// Persist identity only after every replica's initial state is
		// written, so a crash in between bootstraps again from scratch.
		if err := saveIdentity(s.eng, id); err != nil {
			return err
		}
	}
	h := &handler{store: st}
	var th transport.Handler = h
	if cfg.FaultInjection {
		s.faulty = transport.NewFaulty(h)
		th = s.faulty
		s.log.Warn("fault injection enabled: /v1/admin/fault can partition this node and stall its disk")
	}
	peerSrvTLS, peerCliTLS, err := cfg.peerTLS()
	if err != nil {
		return err
	}
	tr, err := transport.NewGRPC(transport.Config{
		NodeID: id.NodeID, ListenAddr: cfg.PeerAddr, Peers: id.Peers, Handler: th,
		Unreachable: st.Unreachable, Logger: s.log, ServerTLS: peerSrvTLS, ClientTLS: peerCliTLS,
		// Incoming snapshots spill to the data directory: they keep the
		// reserve free too, or one could fill the disk under every shard.
		DiskFree: s.disk.snapshotFree, DiskReserve: s.disk.reserve,
	})
	if err != nil {
		return err
	}
	s.tr = tr
	tr.SetSnapshotRate(cfg.SnapshotRate)
	var nodeTr transport.Transport = tr
	if s.faulty != nil {
		s.faulty.Wrap(tr)
		nodeTr = s.faulty
	}
	st.SetTransport(nodeTr)
	if s.coord, err = kv.New(kv.Config{
		NodeID: id.NodeID, HTTPAddr: cfg.HTTPAddr, PeerAddr: cfg.PeerAddr, Peers: id.Peers,
		Replication: id.Replication, Map: id.Map, Store: st, Transport: nodeTr, Engine: s.eng,
		DefaultTimeout: cfg.RequestTimeout, Version: cfg.Version, Logger: s.log, Clock: s.clock,
		Disk: s.disk.State, ShardSoftLimit: cfg.ShardSoftLimit,
	}); err != nil {
		return err
	}
	h.coord = s.coord
	s.nodeTr = nodeTr
	if err := s.buildMembership(id); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	registerMetrics(reg, s)
	registerTLSMetrics(reg, s)
	acfg := httpapi.Config{
		MaxKeySize: cfg.MaxKeySize, MaxValueSize: cfg.MaxValueSize, RequestTimeout: cfg.RequestTimeout,
		MaxInflight: cfg.MaxInflight, Logger: s.log, Registerer: reg, Gatherer: reg,
		Stopping: s.stopping, Members: membership{s.members, s.balancer},
	}
	if s.faulty != nil {
		acfg.Faults = faults{s}
	}
	api, err := httpapi.New(apiBackend{s.coord, s}, acfg)
	if err != nil {
		return err
	}
	api = s.withAuth(api, reg)
	s.peers = id.Peers
	clientTLS, err := cfg.clientTLS()
	if err != nil {
		return err
	}
	s.lis, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: listen %s: %w", cfg.HTTPAddr, err)
	}
	if err := s.startEtcd(id); err != nil {
		return err
	}
	// HTTP/1.1 with pipelined requests served concurrently (internal/http1)
	// for curl, wrk-style and pipelining clients, and HTTP/2 without TLS
	// (prior knowledge, "h2c") on the same port for clients that multiplex
	// many requests over few connections, as etcd's gRPC clients do.
	// Both are Cairn's lean servers: HTTP/2 streams are answered from
	// buffered answers, several per write (internal/http2). With TLS the
	// port is TLS only; ALPN's h2 goes to the same HTTP/2 server.
	s.http = &http1.Server{
		TLSConfig: clientTLS,
		Handler:   api,
		H2: &http2.Server{Handler: api, MaxConcurrentStreams: h2Streams, MaxBodyBytes: int64(acfg.MaxValueSize),
			IdleTimeout: 2 * time.Minute, Reject: httpapi.WriteProtocolError, Logger: s.log},
		MaxPipeline:       h1Pipeline,
		MaxConns:          cfg.MaxConns,
		MaxBodyBytes:      int64(acfg.MaxValueSize),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		RequestTimeout:    acfg.RequestTimeout,
		Reject:            httpapi.WriteProtocolError,
		// A lone key-value request runs on its connection's reader: its
		// handler ends within the request timeout.
		Inline: inlineRequest,
		Logger: s.log,
	}
	return nil
}

func (s *Server) warnConflicts(id identity) {
	c := s.cfg
	if c.NodeID != 0 && c.NodeID != id.NodeID {
		s.log.Warn("ignoring --node-id: the data dir belongs to another node", "flag", c.NodeID, "persisted", id.NodeID)
	}
	if c.Shards != 0 && c.Shards != len(id.Map.Shards) {
		s.log.Warn("ignoring --shards: the cluster was bootstrapped with another count", "flag", c.Shards, "persisted", len(id.Map.Shards))
	}
	if c.Replication != 0 && c.Replication != id.Replication {
		s.log.Warn("ignoring --replication: persisted value wins", "flag", c.Replication, "persisted", id.Replication)
	}
	if len(c.InitialCluster) != 0 && fmt.Sprint(c.InitialCluster) != fmt.Sprint(id.Peers) {
		s.log.Warn("ignoring --initial-cluster: persisted membership wins", "flag", c.InitialCluster, "persisted", id.Peers)
	}
}

// h2Streams and h1Pipeline bound the requests one HTTP/2 or HTTP/1.1
// connection carries at once; the node-wide bound is --max-inflight.
const (
	h2Streams  = 1000
	h1Pipeline = 1000
)

// Start serves HTTP and starts the replicas.
func (s *Server) Start() {
	if s.cfg.TuneRuntime {
		tuneGC(s.log)
		followMemoryLimit(s.log, s.setPebbleBudget)
	}
	s.store.Start(s.fresh)
	go s.runDiskGuard(s.stopping)
	s.startAuth(s.peers)
	go func() {
		if err := s.http.Serve(s.lis); err != nil && !errors.Is(err, http1.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	s.serveEtcd()
	s.startMembership()
	s.log.Info("node started", "http", s.lis.Addr().String(), "peer", s.tr.Addr(), "etcd", s.EtcdAddr(), "fresh", s.fresh,
		"client_tls", !s.cfg.TLS.IsZero(), "peer_tls", !s.cfg.PeerTLS.IsZero(),
		"replicas", len(s.store.Replicas()), "startup", time.Since(s.began).Round(time.Microsecond).String())
}

// HTTPAddr is the address HTTP listens on.
func (s *Server) HTTPAddr() string { return s.lis.Addr().String() }

// Stop shuts the node down in reverse order of start.
func (s *Server) Stop(ctx context.Context) error {
	s.beginsStop()
	if s.http != nil {
		_ = s.http.Shutdown(ctx)
	}
	grace := time.Second
	if d, ok := ctx.Deadline(); ok {
		grace = max(time.Until(d), 0)
	}
	s.stopEtcd(grace)
	if s.authDone != nil {
		<-s.authDone
	}
	s.bgCancel()
	s.bg.Wait()
	s.closeAll()
	return nil
}

func (s *Server) closeAll() {
	if s.etcdLis != nil {
		_ = s.etcdLis.Close() // already closed when the etcd API served
	}
	if s.tr != nil {
		s.tr.Close()
	}
	if s.store != nil {
		s.store.Stop()
	}
	if s.lis != nil && s.http == nil {
		s.lis.Close()
	}
	if s.eng != nil {
		if err := s.eng.Close(); err != nil {
			s.log.Warn("closing engine", "err", err)
		}
		s.eng = nil
	}
}

// handler adapts the store and coordinator to transport.Handler.
type handler struct {
	store *store.Store
	coord *kv.Coordinator
}

func (h *handler) HandleRaft(envs []transport.Envelope) { h.store.HandleRaft(envs) }

func (h *handler) HandleSnapshot(ctx context.Context, env transport.Envelope, next func() ([]byte, error)) error {
	return h.store.HandleSnapshot(ctx, env, next)
}

func (h *handler) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	if h.coord == nil {
		return &wire.Response{Status: wire.StatusStopping}
	}
	return h.coord.HandleRequest(ctx, req)
}

// inlineRequest names the requests the HTTP/1 server may run on their
// connection's reader when they are alone on it (http1.Server.Inline):
// the key-value data paths, whose handlers end within the request timeout.
func inlineRequest(r *http.Request) bool {
	p := r.URL.Path
	return p == "/v0/entity" || strings.HasPrefix(p, "/v1/kv/")
}

// DefaultWatchHistoryBytes is cairn serve's --watch-history-bytes default:
// each shard's change history is bounded to this many bytes as well as
// to --watch-history log indexes.
const DefaultWatchHistoryBytes = statemachine.DefaultHistoryBytes
