package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
)

// The peer port carries two protocols: gRPC (forwarded requests and
// snapshots) and the raft stream (raw.go). The accept loop hands each
// connection to its own goroutine, which does the TLS handshake when the
// port speaks mutual TLS, reads the first 8 bytes and either keeps the
// connection as a raft stream (rawMagic) or passes it, those bytes put
// back, to the gRPC server through grpcListener.

// sniffTimeout bounds the TLS handshake and the first bytes of an
// accepted connection.
const sniffTimeout = 10 * time.Second

// acceptLoop accepts peer connections until the listener closes.
func (t *GRPC) acceptLoop() {
	var delay time.Duration
	for {
		c, err := t.lis.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or the like: wait, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.cfg.Logger.Warn("transport: accept failed", "err", err, "retry", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !t.track(c, true) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go func() { defer t.wg.Done(); t.serveConn(c) }()
	}
}

// track adds c to (add) or removes it from the connections Close closes;
// it reports false once the transport is closed.
func (t *GRPC) track(c net.Conn, add bool) bool {
	t.connsMu.Lock()
	defer t.connsMu.Unlock()
	if !add {
		delete(t.conns, c)
		return true
	}
	if t.conns == nil {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

// closeConns closes every tracked connection and refuses new ones.
func (t *GRPC) closeConns() {
	t.connsMu.Lock()
	defer t.connsMu.Unlock()
	for c := range t.conns {
		c.Close()
	}
	t.conns = nil
}

// serveConn identifies one accepted connection and serves it.
func (t *GRPC) serveConn(raw net.Conn) {
	handed := false
	defer func() {
		if !handed {
			raw.Close()
		}
		t.track(raw, false)
	}()
	_ = raw.SetDeadline(time.Now().Add(sniffTimeout))
	c := raw
	// node: the node the peer's certificate names (0: none, or plain
	// TCP). What arrives on the connection must come from it.
	var node uint64
	if t.serverTLS != nil {
		tc := tls.Server(raw, t.serverTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			if t.ctx.Err() == nil {
				t.stats.tlsRefused.Add(1)
				t.stats.logTLS(&t.stats.tlsLogIn, t.cfg.Logger, "transport: refused a peer connection: TLS handshake failed",
					"remote", raw.RemoteAddr().String(), "err", err, "refused", t.stats.tlsRefused.Load())
			}
			return
		}
		c = tc
		if cs := tc.ConnectionState(); len(cs.PeerCertificates) > 0 {
			node = security.CertNodeID(cs.PeerCertificates[0])
		}
	}
	var head [len(rawMagic)]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if string(head[:]) == rawMagic {
		t.serveRaw(c, node)
		return
	}
	handed = t.grpcLis.hand(&prefixConn{Conn: c, pre: head[:], node: node})
}

// serveRaw reads frames from one raft stream and hands each batch to the
// Handler, until the stream ends. A frame over maxFrame or that does not
// decode ends it (Stats.BadFrames); so does a handler panic (Stats.Panics).
// The frame buffer grows with the bytes that arrive, not with what a
// header claims.
//
// With node set (the certificate's), messages claiming another sender are
// dropped (Stats.WrongSender): one node's key must not let it speak as
// another.
func (t *GRPC) serveRaw(c net.Conn, node uint64) {
	defer func() {
		if p := recover(); p != nil {
			t.stats.panics.Add(1)
			t.cfg.Logger.Error("peer handler panicked: stream dropped", "rpc", "raft", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var buf []byte
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			t.stats.badFrames.Add(1)
			return
		}
		var err error
		if buf, err = readFrame(r, buf, int(n)); err != nil {
			return
		}
		envs, err := DecodeBatch(buf)
		if err != nil {
			t.stats.badFrames.Add(1)
			return
		}
		if envs = t.stats.fromNode(envs, node); len(envs) > 0 {
			t.cfg.Handler.HandleRaft(envs)
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// readFrame reads n bytes into buf (reused), growing it by at most its
// size or 64 KiB at a time, so that a lying header costs only what the
// sender really sent.
func readFrame(r io.Reader, buf []byte, n int) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < n {
		step := min(n-len(buf), max(len(buf), 64<<10))
		buf = slices.Grow(buf, step)
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+step]); err != nil {
			return buf, err
		}
		buf = buf[:len(buf)+step]
	}
	return buf, nil
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	pre  []byte
	node uint64 // the node the peer's certificate names (0: none)
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// grpcListener is the listener the gRPC server serves: it yields the
// connections serveConn recognised as gRPC.
type grpcListener struct {
	addr      net.Addr
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newGRPCListener(addr net.Addr) *grpcListener {
	return &grpcListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to the gRPC server; false if it is closed (c is not taken).
func (l *grpcListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *grpcListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *grpcListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *grpcListener) Addr() net.Addr { return l.addr }

// fromNode drops the envelopes that claim another sender than node
// (0: unchecked), counting them.
func (c *counters) fromNode(envs []Envelope, node uint64) []Envelope {
	if node == 0 {
		return envs
	}
	kept := envs[:0]
	for _, e := range envs {
		if e.Msg.From == node {
			kept = append(kept, e)
		} else {
			c.wrongSender.Add(1)
		}
	}
	return kept
}

// nodeCreds are the gRPC server's transport credentials: serveConn has
// done the TLS handshake already; they hand gRPC the node the
// connection's certificate names, which the handlers check senders
// against (authNode).
type nodeCreds struct{}

type nodeAuth struct{ node uint64 }

func (nodeAuth) AuthType() string { return "cairn-node" }

func (nodeCreds) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, nil, nil
}

func (nodeCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var node uint64
	if pc, ok := c.(*prefixConn); ok {
		node = pc.node
	}
	return c, nodeAuth{node}, nil
}

func (nodeCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "cairn-node"}
}
func (nodeCreds) Clone() credentials.TransportCredentials { return nodeCreds{} }
func (nodeCreds) OverrideServerName(string) error         { return nil }

// authNode is the node the certificate of the connection ctx's call
// came on names (0: none).
func authNode(ctx context.Context) uint64 {
	if p, ok := grpcpeer.FromContext(ctx); ok {
		if a, ok := p.AuthInfo.(nodeAuth); ok {
			return a.node
		}
	}
	return 0
}
