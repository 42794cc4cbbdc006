package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// newH2Transport is one HTTP/2 connection's client: golang.org/x/net's
// Transport (prior knowledge without TLS, ALPN h2 with it) over a
// connection whose writes are coalesced (coalescingConn), with at most
// the server's announced streams in flight.
func newH2Transport(tlsCfg *tls.Config) http.RoundTripper {
	tr := &http2.Transport{StrictMaxConcurrentStreams: true, ReadIdleTimeout: 30 * time.Second, DisableCompression: true}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if tlsCfg == nil {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newCoalescingConn(nc), nil
		}
		return tr
	}
	// Over TLS too: the coalescing sits under the TLS records, so the
	// frames of many requests leave in one write of one or more records.
	cfg := tlsCfg.Clone()
	cfg.NextProtos = []string{"h2"}
	tr.TLSClientConfig = cfg
	tr.DialTLSContext = func(ctx context.Context, network, addr string, c *tls.Config) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if c.ServerName == "" {
			c = c.Clone()
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(newCoalescingConn(nc), c)
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			return nil, fmt.Errorf("bench: %s did not agree to HTTP/2 (ALPN %q)", addr, p)
		}
		return tc, nil
	}
	return tr
}

// coalescingConn gathers the writes made while its writer goroutine is
// busy into one write to the socket: the Transport flushes every
// request's frames on their own, and a thousand clients on a hundred
// connections would otherwise cost a system call per request.
type coalescingConn struct {
	net.Conn
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	err     error
	closed  bool
	writing bool
}

func newCoalescingConn(nc net.Conn) *coalescingConn {
	c := &coalescingConn{Conn: nc}
	c.cond = sync.NewCond(&c.mu)
	go c.writeLoop()
	return c
}

// maxPending bounds the bytes Write accepts before the socket takes them.
const maxPending = 1 << 20

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) > maxPending && c.err == nil && !c.closed {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	c.buf = append(c.buf, p...)
	c.cond.Broadcast()
	return len(p), nil
}

func (c *coalescingConn) writeLoop() {
	var out []byte
	c.mu.Lock()
	for {
		for len(c.buf) == 0 && !c.closed {
			c.cond.Wait()
		}
		if len(c.buf) == 0 {
			c.mu.Unlock()
			return
		}
		if len(c.buf) < 16<<10 {
			// Let the other requests being written now join this write.
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		out, c.buf = c.buf, out[:0]
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.buf = nil
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		c.cond.Broadcast()
	}
}

func (c *coalescingConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}
