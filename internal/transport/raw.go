package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"
)

// The raft stream: raft messages travel on one plain connection per peer
// (TCP, or mutual TLS), on the peer port, without gRPC. The connection
// opens with rawMagic; then each frame is a 4-byte big-endian length and
// an EncodeBatch of that many bytes (at most maxFrame). Only the dialing
// side writes: the accepting side reads frames and hands each batch to the
// Handler on its reading goroutine. The peer server tells the two protocols
// apart by the first bytes of a connection (mux.go).

// rawMagic opens every raft stream connection. HTTP/2 connections open
// with "PRI * HTTP/2.0", so the two never meet.
const rawMagic = "CAIRNRF1"

// maxFrame bounds one raft stream frame: what a frame's header may claim.
// Raft caps one message at about 1 MiB of entries; a value is at most
// 8 MiB by default.
const maxFrame = maxMsg

// frameTarget: the sender starts a new frame once the current one holds
// this much, so frames stay far below maxFrame.
const frameTarget = 4 << 20

// Timeouts of the raft stream's sender.
const (
	// rawDialTimeout bounds connecting and the TLS handshake.
	rawDialTimeout = 2 * time.Second
	// rawWriteTimeout: a write blocked this long (the peer stopped
	// reading, or the network dropped everything) breaks the connection.
	rawWriteTimeout = 10 * time.Second
)

// Reconnection backoff of the raft stream, as gRPC's for the other RPCs.
const (
	backoffBase = 50 * time.Millisecond
	backoffMax  = time.Second
)

var errSelfConnect = errors.New("transport: connection to a peer's port came back to itself")

// rawOut is one outgoing raft stream connection.
type rawOut struct {
	conn net.Conn
	// closed is set by the watcher when the peer closed the connection or
	// it failed: the next batch reconnects instead of being lost.
	closed atomic.Bool
	// deadline is when the write deadline last set runs out.
	deadline time.Time
}

// rawLoop owns the raft stream to one peer: it waits for the queue, takes
// all that is queued (up to 4096 batches' envelopes), encodes it into
// frames and writes them with one call, reconnecting with backoff. Once
// it wrote or dropped what it took, it gives those bytes back to the
// peer's budget (Config.QueueBytes).
func (t *GRPC) rawLoop(p *peer) {
	var out *rawOut
	var old legacyStream
	defer func() {
		if out != nil {
			out.conn.Close()
		}
		old.close()
	}()
	var buf []byte
	var envs []Envelope
	var delay time.Duration
	var nextDial time.Time
	// taken: the bytes of the batches taken, written or dropped since.
	var taken int64
	for {
		p.queued.Add(-taken)
		taken = 0
		envs = envs[:0]
		select {
		case first := <-p.queue:
			envs = append(envs, first.envs...)
			taken += first.size
		case <-p.ctx.Done():
			return
		}
	drain:
		for len(envs) < 4096 {
			select {
			case more := <-p.queue:
				envs = append(envs, more.envs...)
				taken += more.size
			default:
				break drain
			}
		}
		if p.legacy.Load() {
			if out != nil {
				out.conn.Close()
				out = nil
			}
			t.sendLegacy(p, &old, envs)
			clear(envs)
			continue
		}
		if out != nil && out.closed.Load() {
			out.conn.Close()
			out = nil
		}
		fresh := false
		if out == nil {
			if time.Now().Before(nextDial) {
				p.reachable.Store(false)
				t.report(p.id, envs)
				continue
			}
			c, err := t.dialRaw(p)
			if err != nil {
				delay = min(max(time.Duration(float64(delay)*1.6), backoffBase), backoffMax)
				nextDial = time.Now().Add(time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64())))
				p.reachable.Store(false)
				t.report(p.id, envs)
				continue
			}
			delay = 0
			out = &rawOut{conn: c}
			t.wg.Add(1)
			go func() { defer t.wg.Done(); out.watch(p) }()
			fresh = true
		}
		buf = buf[:0]
		if fresh {
			buf = append(buf, rawMagic...)
		}
		var tooBig bool
		buf, tooBig = appendFrames(buf, envs)
		if tooBig {
			// A message over maxFrame cannot travel; raft hears it lost.
			t.report(p.id, envs)
		}
		if err := out.write(buf); err != nil {
			out.conn.Close()
			out = nil
			p.reachable.Store(false)
			t.report(p.id, envs)
			continue
		}
		p.reachable.Store(true)
		if cap(buf) > frameTarget {
			buf = nil // do not keep a large buffer for the next small batch
		}
		clear(envs) // drop the messages' references until the next batch
	}
}

// write writes b, keeping a write deadline about rawWriteTimeout ahead
// (moved at most once a second, which costs little).
func (o *rawOut) write(b []byte) error {
	if now := time.Now(); o.deadline.Sub(now) < rawWriteTimeout-time.Second {
		o.deadline = now.Add(rawWriteTimeout)
		if err := o.conn.SetWriteDeadline(o.deadline); err != nil {
			return err
		}
	}
	_, err := o.conn.Write(b)
	return err
}

// watch reads the outgoing connection, on which the peer never writes,
// until it ends: the peer closed it (it restarted, or refused a frame) or
// it broke. It then marks it closed so the sender reconnects for the next
// batch, as gRPC's reader did for its streams. A peer that writes ends it
// too; if what it wrote starts like an HTTP/2 SETTINGS frame, the peer is
// a gRPC server of an earlier version (it greets every connection so)
// and p's sender turns to the gRPC stream (legacy.go).
func (o *rawOut) watch(p *peer) {
	// The peer's end (Close, RemovePeer, an address change) closes the
	// connection too: a sender blocked writing to a peer that stopped
	// reading would otherwise hold Close for the write deadline.
	stop := context.AfterFunc(p.ctx, func() { o.conn.Close() })
	defer stop()
	var b [9]byte
	n, _ := io.ReadFull(o.conn, b[:])
	if n == len(b) && isHTTP2Settings(b) {
		p.legacy.Store(true)
	}
	o.closed.Store(true)
	o.conn.Close()
}

// appendFrames appends envs to b as frames of about frameTarget bytes at
// most (a longer message travels alone). It leaves out messages over
// maxFrame and reports whether it did.
func appendFrames(b []byte, envs []Envelope) ([]byte, bool) {
	tooBig := false
	for len(envs) > 0 {
		n, size := 0, 0
		for n < len(envs) {
			s := envBytes(&envs[n])
			if n > 0 && size+s > frameTarget {
				break
			}
			size += s
			n++
		}
		if size > maxFrame {
			tooBig = true
			envs = envs[n:]
			continue
		}
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		b = appendBatch(b, envs[:n])
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
		envs = envs[n:]
	}
	return b, tooBig
}

// dialRaw connects to p's peer port (from this node's own address, see
// dialFrom), with mutual TLS when configured, counting failed handshakes.
func (t *GRPC) dialRaw(p *peer) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, rawDialTimeout)
	defer cancel()
	c, err := t.dial(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	if c.LocalAddr().String() == c.RemoteAddr().String() {
		// TCP connected to itself (simultaneous open): nothing listens
		// on the peer's port, which is in the ephemeral range. Kept, it
		// would hold the port the peer is about to listen on.
		c.Close()
		return nil, errSelfConnect
	}
	if t.cfg.ClientTLS == nil {
		return c, nil
	}
	cfg := t.cfg.ClientTLS.Clone()
	if cfg.ServerName == "" {
		// As gRPC does: verify the name or IP the peer is dialed by.
		host, _, err := net.SplitHostPort(p.addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		if p.ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			t.stats.tlsDialFailed.Add(1)
			t.stats.logTLS(&t.stats.tlsLogOut, t.cfg.Logger, "transport: TLS handshake with a peer failed", "peer", p.addr, "err", err,
				"failed", t.stats.tlsDialFailed.Load())
		}
		return nil, err
	}
	return tc, nil
}
