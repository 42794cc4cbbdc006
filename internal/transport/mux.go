package transport

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"time"
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
	}
	var head [len(rawMagic)]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return
	}
	_ = raw.SetDeadline(time.Time{})
	if string(head[:]) == rawMagic {
		t.serveRaw(c)
		return
	}
	handed = t.grpcLis.hand(&prefixConn{Conn: c, pre: head[:]})
}

// serveRaw reads frames from one raft stream and hands each batch to the
// Handler, until the stream ends. A frame over maxFrame or that does not
// decode ends it (Stats.BadFrames); so does a handler panic (Stats.Panics).
// The frame buffer grows with the bytes that arrive, not with what a
// header claims.
func (t *GRPC) serveRaw(c net.Conn) {
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
		t.cfg.Handler.HandleRaft(envs)
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
	pre []byte
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
