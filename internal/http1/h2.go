package http1

import (
	"bufio"
	"net"
	"sync"
)

// ConnServer is an H2Server that serves one connection at a time in the
// calling goroutine when wait is set (internal/http2's Server): false if
// it is shut down (nc is not closed then).
type ConnServer interface {
	ServeConn(nc net.Conn, wait bool) bool
}

// handOver hands an HTTP/2 connection to Server.H2. A ConnServer serves
// it in the connection's goroutine, so the connection counts against
// MaxConns, and Shutdown waits for it, until it ends; another H2Server
// takes it through its listener, and it counts no longer.
func (c *conn) handOver(nc net.Conn) {
	if cs, ok := c.s.H2.(ConnServer); ok {
		if !cs.ServeConn(nc, true) {
			nc.Close()
		}
		return
	}
	if !c.s.h2lis.hand(nc) {
		nc.Close()
	}
}

// chanListener hands sniffed HTTP/2 connections to the H2 server.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// bufConn is a connection whose first bytes were already buffered.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
