package http1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pipeListener is a listener of in-memory connections (net.Pipe): Dial
// hands the server's end to Accept. Its first failures accepts fail with
// EMFILE, as they do on a node out of file descriptors.
type pipeListener struct {
	conns    chan net.Conn
	done     chan struct{}
	once     sync.Once
	failures atomic.Int32
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Dial returns the client's end of a new connection, or fails when the
// server does not accept it within 10 s. (The server's pauses after the
// test's accept failures add up to 35 ms; a second, the bound before,
// is within reach of a loaded machine under the race detector.)
func (l *pipeListener) Dial() (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
		_ = cli.SetDeadline(time.Now().Add(10 * time.Second))
		return cli, nil
	case <-time.After(10 * time.Second):
		return nil, os.ErrDeadlineExceeded
	}
}

// An accept that fails for want of file descriptors (EMFILE) is
// temporary: the server waits a moment and accepts again, instead of
// returning from Serve and leaving the port unserved for good.
func TestServeSurvivesTemporaryAcceptErrors(t *testing.T) {
	l := newPipeListener()
	l.failures.Store(3)
	s := &Server{Handler: http.HandlerFunc(echo)}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	answered := make(chan *Response, 1)
	go func() {
		c, err := l.Dial()
		if err != nil {
			answered <- nil
			return
		}
		defer c.Close()
		go io.WriteString(c, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
		cl := &call{}
		if readResponse(bufio.NewReader(c), cl) != nil {
			answered <- nil
			return
		}
		answered <- &cl.resp
	}()
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v after a temporary accept error; the port is no longer served", err)
	case r := <-answered:
		if r == nil || r.Status != 200 || string(r.Body) != "GET /after " {
			t.Fatalf("after temporary accept errors: %+v", r)
		}
	}
}
