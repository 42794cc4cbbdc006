package etcdapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/kv"
)

// Backend is what the etcd API needs of a node: the coordinator's reads,
// writes and cluster views. *kv.Coordinator implements it.
type Backend interface {
	Get(ctx context.Context, key []byte, opts kv.ReadOptions) (kv.Value, error)
	Put(ctx context.Context, key, value []byte, opts kv.WriteOptions) (uint64, bool, error)
	Delete(ctx context.Context, key []byte, opts kv.WriteOptions) (uint64, error)
	List(ctx context.Context, opts kv.ListOptions) (kv.ListPage, error)
	Status() kv.NodeStatus
	Cluster(ctx context.Context) kv.ClusterInfo
	// The shards' histories, which watches read (internal/kv/watch.go).
	WatchShards(key, end []byte) []uint64
	ShardEvents(id, from uint64, maxBytes int) (kv.HistoryPage, <-chan struct{}, error)
	ShardRevision(ctx context.Context, id uint64) (uint64, error)
	// The shards' replicated clocks, which lease expiry runs on
	// (lease_expiry.go).
	ShardClock(id uint64) (time.Duration, bool)
	LeaderClock(id uint64) (time.Duration, bool)
	StampClock(id uint64)
}

// Config configures the etcd API server. New fills its defaults
// (EnsureDefaults) and validates it.
type Config struct {
	// ClusterID is reported in every response header; it must be the same
	// on every node of a cluster. Required.
	ClusterID uint64
	// MemberID is this node's id (Cairn's node id). Required.
	MemberID uint64
	// MaxKeySize and MaxValueSize bound a key and a value in bytes, as on
	// the HTTP API. Defaults 4096 and 8 MiB.
	MaxKeySize, MaxValueSize int
	// RequestTimeout bounds a call without a deadline of its own. Default 5 s.
	RequestTimeout time.Duration
	// EtcdPortOffset is added to a member's HTTP port to name its etcd
	// client URL in MemberList (cairn serve's default --etcd-addr is the
	// HTTP port + 100). Default 100.
	EtcdPortOffset int
	// ProgressInterval: how often a watch created with progress_notify
	// gets a progress notification. Default 10 minutes, as etcd's.
	ProgressInterval time.Duration
	// MaxStreams bounds the streams (calls, watch and keepalive streams)
	// one connection carries at once; the server announces it in its
	// HTTP/2 SETTINGS, gRPC clients hold a call back until a stream
	// ends, and a stream opened beyond it is refused (RST_STREAM
	// REFUSED_STREAM). Default 1000, as Cairn's HTTP/2 port.
	MaxStreams uint32
	// MaxConns bounds the connections served at once; one more is closed
	// as soon as it is accepted. Default 4096, as the HTTP port
	// (cairn serve --max-conns sets both).
	MaxConns int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// TLS, when set, makes the API speak gRPC over TLS only (the client
	// port's certificate and client-certificate policy). Nil: plain.
	TLS *tls.Config
	// Auth, when set, makes every call but Status and Authenticate need
	// a token of the role it needs (auth.go); AuthCounters, when set,
	// counts the refusals. Nil: no checks.
	Auth         Authenticator
	AuthCounters *auth.Counters
	// StreamAuthInterval: with Auth, how often the token of an open
	// stream (Watch, LeaseKeepAlive) is checked again, each wait drawn
	// from the last quarter below it (auth_stream.go). A stream whose
	// token is revoked (on this node; on another, up to auth.CacheTTL
	// later) or expires ends within about this long. Shorter costs a
	// token check per stream that often (a store read once the
	// authenticator's cache of the token lapses). Default 5 s.
	StreamAuthInterval time.Duration
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c Config) EnsureDefaults() Config {
	if c.MaxKeySize == 0 {
		c.MaxKeySize = 4096
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = 8 << 20
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.EtcdPortOffset == 0 {
		c.EtcdPortOffset = 100
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = 10 * time.Minute
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 1000
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4096
	}
	if c.StreamAuthInterval == 0 {
		c.StreamAuthInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ErrInvalidConfig is wrapped by Validate's errors.
var ErrInvalidConfig = errors.New("etcdapi: invalid config")

// Validate reports the first field of c (filled by EnsureDefaults) that is
// out of range.
func (c Config) Validate() error {
	switch {
	case c.ClusterID == 0 || c.MemberID == 0:
		return fmt.Errorf("%w: ClusterID and MemberID are required", ErrInvalidConfig)
	case c.MaxKeySize < 1 || c.MaxValueSize < 1:
		return fmt.Errorf("%w: MaxKeySize %d and MaxValueSize %d: want at least 1", ErrInvalidConfig, c.MaxKeySize, c.MaxValueSize)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("%w: RequestTimeout %v: want more than 0", ErrInvalidConfig, c.RequestTimeout)
	case c.ProgressInterval <= 0:
		return fmt.Errorf("%w: ProgressInterval %v: want more than 0", ErrInvalidConfig, c.ProgressInterval)
	case c.MaxConns < 1:
		return fmt.Errorf("%w: MaxConns %d: want at least 1", ErrInvalidConfig, c.MaxConns)
	case c.StreamAuthInterval <= 0:
		return fmt.Errorf("%w: StreamAuthInterval %v: want more than 0", ErrInvalidConfig, c.StreamAuthInterval)
	}
	return nil
}

// The gRPC flow-control windows of a stream and of a connection: what a
// client may send ahead of the server reading it.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// Server serves the etcd v3 API over a Backend.
type Server struct {
	// b is the etcd key space (keyspace.go); sys is the node's whole key
	// space, which the lease records live in.
	b, sys Backend
	cfg    Config
	g      *grpc.Server
	// done is closed by Stop: watch streams end (Unavailable) rather
	// than hold the graceful stop.
	done     chan struct{}
	stopOnce sync.Once
	// loops: the lease expiry loop (started by Serve).
	loops     sync.WaitGroup
	startOnce sync.Once
}

// New returns a Server over b; Serve starts it.
func New(b Backend, cfg Config) (*Server, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{b: userSpace{b}, sys: b, cfg: cfg, done: make(chan struct{})}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxKeySize + cfg.MaxValueSize + 64<<10),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Fixed flow-control windows: with windows of its own, gRPC does
		// not estimate the bandwidth-delay product, which costs a ping
		// (and its flush) per round trip on every busy connection.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		// Unbounded by default in gRPC (and in etcd): every Watch or
		// LeaseKeepAlive stream holds memory on the node.
		grpc.MaxConcurrentStreams(cfg.MaxStreams),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	if cfg.Auth != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.authUnary), grpc.ChainStreamInterceptor(s.authStream))
	}
	s.g = grpc.NewServer(opts...)
	pb.RegisterKVServer(s.g, &kvServer{s: s})
	pb.RegisterClusterServer(s.g, &clusterServer{s: s})
	pb.RegisterMaintenanceServer(s.g, &maintenanceServer{s: s})
	pb.RegisterLeaseServer(s.g, &leaseServer{s: s})
	pb.RegisterWatchServer(s.g, &watchServer{s: s})
	pb.RegisterAuthServer(s.g, &authServer{s: s})
	return s, nil
}

// Serve serves on lis until Stop; it returns nil after Stop.
func (s *Server) Serve(lis net.Listener) error {
	s.startOnce.Do(func() {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.expireLoop()
		}()
	})
	err := s.g.Serve(&limitListener{Listener: lis, slots: make(chan struct{}, s.cfg.MaxConns)})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop ends every call: it waits up to grace for calls in flight, then
// cuts them.
func (s *Server) Stop(grace time.Duration) {
	s.stopOnce.Do(func() { close(s.done) })
	done := make(chan struct{})
	go func() { s.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.g.Stop()
	}
	s.loops.Wait()
}

// header is the response header of a call that saw revision rev.
func (s *Server) header(rev uint64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: s.cfg.ClusterID, MemberId: s.cfg.MemberID, Revision: int64(rev)}
}

// withDeadline bounds ctx by the configured timeout when it has none.
func (s *Server) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// limitListener hands out at most cap(slots) connections at once. One
// more is closed as soon as it is accepted: its client fails at once
// (gRPC reports Unavailable; clientv3 tries another endpoint) instead of
// waiting in the accept queue, and the node holds nothing for it.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, slots: l.slots}, nil
		default:
			_ = c.Close()
		}
	}
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}
