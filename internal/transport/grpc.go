package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// maxMsg bounds one gRPC message: a value (8 MiB by default) plus framing,
// or a batch of raft messages (raft caps one at about 1 MiB of entries).
const maxMsg = 64 << 20

// MaxMessage is the largest message a peer accepts (gRPC or the raft
// stream): a raft entry, with its key, value and framing, larger than
// this never reaches a follower, so a node's key and value limits must
// keep every entry under it.
const MaxMessage = maxMsg

// Config of a GRPC transport.
type Config struct {
	NodeID uint64
	// ListenAddr is the host:port the peer server listens on.
	ListenAddr string
	// Listener, if set, is used instead of listening on ListenAddr.
	Listener net.Listener
	// Peers maps node id to peer address (the local node may be included).
	Peers       map[uint64]string
	Handler     Handler
	Unreachable UnreachableFunc
	// QueueLen bounds the batches queued per peer. Default 1024.
	QueueLen int
	// QueueBytes bounds the raft messages Send accepted for one peer and
	// its sender has not yet written or dropped, by their encoded size:
	// a batch that would go over it is dropped (raft retransmits), unless
	// nothing is pending for the peer, so that a message larger than the
	// bound still travels, alone. Default 128 MiB: two of the largest
	// messages (MaxMessage), so one being written does not shut out the
	// next. QueueLen alone let a peer that stopped reading pin 1024
	// batches of entries of up to 56 MiB each.
	QueueBytes int64
	// MaxSnapshotBytes bounds the data of one incoming snapshot stream;
	// the stream is cut beyond it. Default 64 GiB.
	MaxSnapshotBytes int64
	// MaxIncomingSnapshots bounds the snapshot streams received at once;
	// more are refused (the sender retries later). Default 2.
	MaxIncomingSnapshots int
	// SnapshotIdleTimeout bounds the wait for each frame of an incoming
	// snapshot stream (its header, then every chunk). A stream idle
	// longer — its sender paused, stuck or cut off by a partition — ends
	// with DeadlineExceeded: what it brought is discarded and its place
	// among MaxIncomingSnapshots is freed. Default 1 minute: twice the
	// longest a sender's pacing holds one chunk (maxPaceWait), which
	// leaves 30 s to read a chunk and carry it (1 MiB: 35 KiB/s).
	SnapshotIdleTimeout time.Duration
	// DiskFree, if set, measures the free space of the filesystem
	// incoming snapshots are spilled to (the node's data directory's).
	// A snapshot stream is refused at its start, and cut as a chunk
	// arrives, when spilling it would leave less than DiskReserve free
	// (or nothing at all): the stream ends with ResourceExhausted
	// (ErrDiskReserve), the handler discards what it staged, and the
	// sender retries later. Nil: no check.
	DiskFree func() (free uint64, err error)
	// DiskReserve is the free space incoming snapshots leave alone (see
	// DiskFree).
	DiskReserve uint64
	// ServerTLS and ClientTLS, set together, make the peer port speak
	// mutual TLS (tls.go; internal/security.PeerTLS builds both). Nil:
	// plain TCP.
	ServerTLS, ClientTLS *tls.Config
	Logger               *slog.Logger
}

// EnsureDefaults returns c with its zero fields set to their defaults.
func (c Config) EnsureDefaults() Config {
	if c.QueueLen == 0 {
		c.QueueLen = 1024
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = 2 * MaxMessage
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = 64 << 30
	}
	if c.MaxIncomingSnapshots == 0 {
		c.MaxIncomingSnapshots = 2
	}
	if c.SnapshotIdleTimeout == 0 {
		c.SnapshotIdleTimeout = time.Minute
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
		return errors.New("transport: Config.NodeID is required")
	case c.Listener == nil && c.ListenAddr == "":
		return errors.New("transport: Config.ListenAddr or Listener is required")
	case c.Handler == nil:
		return errors.New("transport: Config.Handler is required")
	case c.QueueLen < 1:
		return fmt.Errorf("transport: QueueLen %d: want at least 1", c.QueueLen)
	case c.QueueBytes < 1:
		return fmt.Errorf("transport: QueueBytes %d: want a positive bound", c.QueueBytes)
	case c.MaxSnapshotBytes < 1:
		return fmt.Errorf("transport: MaxSnapshotBytes %d: want a positive bound", c.MaxSnapshotBytes)
	case c.MaxIncomingSnapshots < 1:
		return fmt.Errorf("transport: MaxIncomingSnapshots %d: want at least 1", c.MaxIncomingSnapshots)
	case c.SnapshotIdleTimeout < 0:
		return fmt.Errorf("transport: SnapshotIdleTimeout %v: want a positive bound", c.SnapshotIdleTimeout)
	case (c.ServerTLS == nil) != (c.ClientTLS == nil):
		return errors.New("transport: ServerTLS and ClientTLS go together (mutual TLS) or not at all")
	}
	return nil
}

// GRPC is the real transport.
type GRPC struct {
	cfg Config
	srv *grpc.Server
	lis net.Listener
	// snapPace bounds the bytes/s of every outgoing snapshot stream
	// together (SetSnapshotRate).
	snapPace pacer
	// peers is replaced whole (copy on write) under peersMu by SetPeer and
	// RemovePeer, and read without a lock on every send.
	peers   atomic.Pointer[map[uint64]*peer]
	peersMu sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stats   counters
	// dialCreds secure the gRPC connections to peers (mutual TLS with
	// Config.ClientTLS, else none).
	dialCreds credentials.TransportCredentials
	// serverTLS is Config.ServerTLS offering gRPC's "h2" by ALPN; nil
	// without TLS.
	serverTLS *tls.Config
	// dial connects to a peer from this node's address (dialFrom).
	dial func(context.Context, string) (net.Conn, error)
	// grpcLis yields the accepted connections that speak gRPC (mux.go).
	grpcLis *grpcListener
	// conns are the accepted connections not handed to gRPC, closed by
	// Close (nil once closed).
	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
}

var _ Transport = (*GRPC)(nil)

type peer struct {
	id   uint64
	addr string
	conn *grpc.ClientConn
	// queue feeds the peer's raft stream sender (rawLoop); queued is the
	// size of the batches Send put in it that the sender has not yet
	// written or dropped (Config.QueueBytes).
	queue     chan queued
	queued    atomic.Int64
	reachable atomic.Bool
	// legacy: the peer answered the raft stream as an HTTP/2 server
	// would, so it is of an earlier version; raft messages go on the
	// gRPC stream until that one fails (legacy.go).
	legacy atomic.Bool
	// stop ends the peer's sender (RemovePeer, or SetPeer with a new
	// address).
	ctx  context.Context
	stop context.CancelFunc
}

// NewGRPC listens and starts one sender goroutine per peer. The peer port
// serves both the raft stream (raw.go) and gRPC (mux.go).
func NewGRPC(cfg Config) (*GRPC, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lis := cfg.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("transport: listen %s: %w", cfg.ListenAddr, err)
		}
	}
	t := &GRPC{cfg: cfg, lis: lis, dial: dialFrom(lis.Addr()), grpcLis: newGRPCListener(lis.Addr()),
		conns: map[net.Conn]struct{}{}}
	t.peers.Store(&map[uint64]*peer{})
	t.ctx, t.cancel = context.WithCancel(context.Background())
	// The accept loop does the TLS handshake (mux.go): the gRPC server
	// gets connections already secured.
	srvOpts := []grpc.ServerOption{grpc.ForceServerCodec(codec{}), grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg), grpc.Creds(nodeCreds{})}
	t.dialCreds = insecure.NewCredentials()
	if cfg.ServerTLS != nil {
		t.serverTLS = cfg.ServerTLS.Clone()
		if !slices.Contains(t.serverTLS.NextProtos, "h2") {
			t.serverTLS.NextProtos = append(t.serverTLS.NextProtos, "h2")
		}
		t.dialCreds = newCountingCreds(cfg.ClientTLS, &t.stats, cfg.Logger)
	}
	t.srv = grpc.NewServer(srvOpts...)
	t.srv.RegisterService(&serviceDesc, &server{h: cfg.Handler, cfg: cfg, stats: &t.stats,
		snapSem: make(chan struct{}, cfg.MaxIncomingSnapshots),
		disk:    &diskRoom{free: cfg.DiskFree, reserve: cfg.DiskReserve, log: cfg.Logger}})
	for id, addr := range cfg.Peers {
		if err := t.SetPeer(id, addr); err != nil {
			t.Close()
			return nil, err
		}
	}
	t.wg.Add(2)
	go func() { defer t.wg.Done(); _ = t.srv.Serve(t.grpcLis) }()
	go func() { defer t.wg.Done(); t.acceptLoop() }()
	return t, nil
}

// SetPeer adds node id at addr to the address book, or moves it there:
// a node that changed its address gets a new connection and sender (what
// was queued for the old one is dropped, as on any broken stream). The
// local node and an unchanged address are no-ops.
func (t *GRPC) SetPeer(id uint64, addr string) error {
	if id == t.cfg.NodeID || id == 0 {
		return nil
	}
	t.peersMu.Lock()
	defer t.peersMu.Unlock()
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	old := *t.peers.Load()
	if p, ok := old[id]; ok && p.addr == addr {
		return nil
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithContextDialer(t.dial),
		grpc.WithTransportCredentials(t.dialCreds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{}), grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return fmt.Errorf("transport: peer %d at %s: %w", id, addr, err)
	}
	p := &peer{id: id, addr: addr, conn: conn, queue: make(chan queued, t.cfg.QueueLen)}
	p.ctx, p.stop = context.WithCancel(t.ctx)
	p.reachable.Store(true)
	next := make(map[uint64]*peer, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[id] = p
	t.peers.Store(&next)
	if prev, ok := old[id]; ok {
		t.cfg.Logger.Info("peer address changed", "peer", id, "from", prev.addr, "to", addr)
		prev.stop()
		prev.conn.Close()
	}
	t.wg.Add(1)
	go func() { defer t.wg.Done(); t.rawLoop(p) }()
	return nil
}

// RemovePeer drops node id from the address book: its sender stops and
// what is sent to it is dropped (ErrUnknownPeer for requests).
func (t *GRPC) RemovePeer(id uint64) {
	t.peersMu.Lock()
	defer t.peersMu.Unlock()
	old := *t.peers.Load()
	p, ok := old[id]
	if !ok {
		return
	}
	next := make(map[uint64]*peer, len(old))
	for k, v := range old {
		if k != id {
			next[k] = v
		}
	}
	t.peers.Store(&next)
	p.stop()
	p.conn.Close()
}

// PeerAddrs returns the address book (node id -> peer address).
func (t *GRPC) PeerAddrs() map[uint64]string {
	out := map[uint64]string{}
	for id, p := range *t.peers.Load() {
		out[id] = p.addr
	}
	return out
}

func (t *GRPC) peer(id uint64) (*peer, bool) {
	p, ok := (*t.peers.Load())[id]
	return p, ok
}

// dialFrom returns a dialer whose connections leave from the host of the
// node's own peer address when that is a specific IP (not 0.0.0.0 or ::),
// so peers see traffic from the address this node is known by — and a
// network partition between node addresses (cairn chaos, with iptables)
// cuts exactly the traffic between those nodes.
func dialFrom(local net.Addr) func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if ta, ok := local.(*net.TCPAddr); ok && ta.IP != nil && !ta.IP.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ta.IP}
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// Addr is the address the peer server listens on.
func (t *GRPC) Addr() string { return t.lis.Addr().String() }

// queued is a batch in a peer's queue and its size (batchBytes).
type queued struct {
	envs []Envelope
	size int64
}

// batchBytes is the encoded size of envs, about (envBytes each).
func batchBytes(envs []Envelope) int64 {
	var n int64
	for i := range envs {
		n += int64(envBytes(&envs[i]))
	}
	return n
}

// Send implements Transport. The batch is dropped, and raft told, when
// the peer's queue holds QueueLen batches or the bytes pending for the
// peer would go over QueueBytes; a batch goes whatever its size when
// nothing is pending.
func (t *GRPC) Send(to uint64, envs []Envelope) {
	p, ok := t.peer(to)
	if !ok {
		return
	}
	// Book the bytes first, so that concurrent senders cannot pass the
	// bound together.
	n := batchBytes(envs)
	if total := p.queued.Add(n); total > n && total > t.cfg.QueueBytes {
		p.queued.Add(-n)
		t.dropQueued(to, envs)
		return
	}
	select {
	case p.queue <- queued{envs: envs, size: n}:
	default:
		p.queued.Add(-n)
		t.dropQueued(to, envs)
	}
}

// dropQueued counts envs, which a full queue refused, and reports them.
func (t *GRPC) dropQueued(to uint64, envs []Envelope) {
	t.stats.queueDrops.Add(uint64(len(envs)))
	t.report(to, envs)
}

func (t *GRPC) report(to uint64, envs []Envelope) {
	if t.cfg.Unreachable == nil {
		return
	}
	ids := make([]uint64, 0, len(envs))
	for _, e := range envs {
		ids = append(ids, e.ShardID)
	}
	t.cfg.Unreachable(to, ids)
}

// SendSnapshot implements Transport: a header frame (the MsgSnap without
// data), then one frame per chunk. gRPC's flow control blocks SendMsg
// while the receiver is behind, so at most a few chunks are in memory.
func (t *GRPC) SendSnapshot(ctx context.Context, to uint64, env Envelope, data SnapshotReader) error {
	p, ok := t.peer(to)
	if !ok {
		return ErrUnknownPeer
	}
	head := env
	if env.Msg.Snapshot != nil {
		sn := *env.Msg.Snapshot
		sn.Data = nil
		head.Msg.Snapshot = &sn
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := p.conn.NewStream(ctx, &serviceDesc.Streams[1], "/cairn.Peer/Snapshot")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	// send sends f. gRPC answers io.EOF when the server ended the
	// stream (it refused the snapshot, or found it idle or too large):
	// its status says why.
	send := func(f *frame) error {
		err := s.SendMsg(f)
		if err == nil {
			return nil
		}
		if errors.Is(err, io.EOF) {
			var ack frame
			if rerr := s.RecvMsg(&ack); rerr != nil && !errors.Is(rerr, io.EOF) {
				return fmt.Errorf("transport: snapshot to %d: %w", to, rerr)
			}
		}
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if err := send(&frame{b: EncodeBatch([]Envelope{head})}); err != nil {
		return err
	}
	for {
		chunk, err := data.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("transport: snapshot to %d: read: %w", to, err)
		}
		if err := t.snapPace.wait(ctx, len(chunk)); err != nil {
			return err
		}
		if err := send(&frame{b: chunk}); err != nil {
			return err
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var ack frame
	if err := s.RecvMsg(&ack); err != nil {
		return fmt.Errorf("transport: snapshot to %d: %w", to, err)
	}
	return nil
}

// Request implements Transport.
func (t *GRPC) Request(ctx context.Context, to uint64, req *wire.Request) (*wire.Response, error) {
	p, ok := t.peer(to)
	if !ok {
		return nil, ErrUnknownPeer
	}
	var out frame
	if err := p.conn.Invoke(ctx, "/cairn.Peer/Request", &frame{b: req.Marshal()}, &out); err != nil {
		if ctx.Err() == nil {
			p.reachable.Store(false)
		}
		return nil, fmt.Errorf("%w: node %d: %v", ErrUnreachable, to, err)
	}
	p.reachable.Store(true)
	var resp wire.Response
	if err := resp.Unmarshal(out.b); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Reachable implements Transport.
func (t *GRPC) Reachable(to uint64) bool {
	if to == t.cfg.NodeID {
		return true
	}
	p, ok := t.peer(to)
	return ok && p.reachable.Load()
}

// Close stops the server and every sender.
func (t *GRPC) Close() error {
	t.peersMu.Lock()
	t.cancel()
	t.peersMu.Unlock()
	t.lis.Close()
	t.grpcLis.Close()
	t.closeConns()
	if t.srv != nil {
		t.srv.Stop()
	}
	for _, p := range *t.peers.Load() {
		p.conn.Close()
	}
	t.wg.Wait()
	return nil
}

// Stats are counters of what the peer server refused.
type Stats struct {
	// BadFrames: frames that did not decode (the stream was closed).
	BadFrames uint64
	// Panics: handler panics recovered (the stream was closed).
	Panics uint64
	// QueueDrops: raft messages Send dropped because the peer's queue
	// was full (QueueLen batches, or QueueBytes); raft heard them lost
	// (Config.Unreachable).
	QueueDrops uint64
	// SnapshotsRefused: snapshot streams refused (too many at once, bad
	// header, over the byte bound, idle beyond SnapshotIdleTimeout, the
	// disk at its reserve, or refused by the handler).
	SnapshotsRefused uint64
	// TLSRefused: incoming connections whose TLS handshake failed (no
	// certificate, or one the cluster CA did not sign); TLSDialFailed:
	// outgoing ones (the peer's certificate did not verify, or the peer
	// refused ours).
	TLSRefused, TLSDialFailed uint64
	// WrongSender: messages, requests and snapshots refused because they
	// claimed another sender than the node the connection's certificate
	// names (peer TLS).
	WrongSender uint64
}

type counters struct {
	badFrames, panics, snapsRefused, wrongSender atomic.Uint64
	queueDrops                                   atomic.Uint64
	tlsRefused, tlsDialFailed                    atomic.Uint64
	// tlsLogIn, tlsLogOut: unix nanos of the last logged failure.
	tlsLogIn, tlsLogOut atomic.Int64
}

// Stats returns the server's counters.
func (t *GRPC) Stats() Stats {
	return Stats{BadFrames: t.stats.badFrames.Load(), Panics: t.stats.panics.Load(),
		SnapshotsRefused: t.stats.snapsRefused.Load(), TLSRefused: t.stats.tlsRefused.Load(),
		TLSDialFailed: t.stats.tlsDialFailed.Load(), WrongSender: t.stats.wrongSender.Load(),
		QueueDrops: t.stats.queueDrops.Load()}
}
