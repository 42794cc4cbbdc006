package http1

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves HTTP/1.1 with pipelined requests handled concurrently, and
// hands HTTP/2 prior-knowledge connections to H2.
type Server struct {
	// Handler serves every HTTP/1.x request.
	Handler http.Handler
	// H2, if set, serves connections that open with the HTTP/2 preface
	// (it should enable only unencrypted HTTP/2); nil closes them. A
	// ConnServer (internal/http2) serves each on the goroutine that
	// accepted it, within MaxConns; another H2Server (an http.Server)
	// takes them through a listener, beyond MaxConns' count.
	H2 H2Server
	// MaxPipeline bounds the requests of one connection read but not yet
	// answered; the server stops reading the connection at the bound.
	// Default 128.
	MaxPipeline int
	// MaxAnswerBytes bounds, per connection, the bytes of answers the
	// handlers produced that are not yet written to the socket (a client
	// that sends requests without reading the answers): beyond it the
	// server starts no further handler and reads no further request of
	// the connection until the writer has drained below it. Handlers
	// that run at once count with the size of the connection's recent
	// answers (a sixteenth of the bound before the first one). Default
	// 16 MiB.
	MaxAnswerBytes int64
	// WriteTimeout bounds one write of answers to the socket; a client
	// that does not read for that long gets its connection closed (and
	// its pending answers dropped). Default 30 s.
	WriteTimeout time.Duration
	// MaxBodyBytes: a request body with a Content-Length over it is not
	// read; the handler sees its ContentLength (and a body that fails to
	// read) and the connection closes after the answer. A chunked body
	// over it is answered 413 by the server, without calling the
	// handler. Default 8 MiB.
	MaxBodyBytes int64
	// BodyBudget bounds the bytes of request bodies the server holds at
	// once across all connections, from the first byte read until the
	// request's handler returns. Bodies are allocated as their bytes
	// arrive, never from the announced length; a request whose body
	// would pass the budget is answered 503 with Retry-After and its
	// connection closed. Default 256 MiB.
	BodyBudget int64
	// MaxConns bounds the connections served at once: HTTP/1 ones, and
	// HTTP/2 ones handed to an H2 that is a ConnServer (for as long as it
	// serves them); a connection accepted beyond it is answered 503 (with
	// Retry-After) and closed. Default 4096.
	MaxConns int
	// MaxHeaderBytes bounds the request line and header fields. Default
	// 64 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading one request's head from its first
	// byte (for a new connection, from the accept); IdleTimeout bounds
	// the wait for the next request's first byte and for each body.
	// Defaults 10 s and 2 min.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// RequestTimeout, if set, gives each request's context a deadline
	// RequestTimeout (plus at most a fiftieth of it, 100 ms at most)
	// after the request was read; the requests of one connection read
	// within that fiftieth share a context and its timer.
	RequestTimeout time.Duration
	// Reject writes the answer to a malformed or refused request (its
	// status is 400, 413, 417, 431, 501, 503 or 505); nil writes the
	// message as plain text.
	Reject func(w http.ResponseWriter, status int, msg string)
	// TLSConfig, if set, makes the port TLS only (tls.go): a plain-HTTP
	// client fails its handshake. ALPN offers h2 (to H2, which must then
	// enable HTTP/2 over TLS) and http/1.1 unless NextProtos says
	// otherwise; the handshake must end within ReadHeaderTimeout of the
	// accept. Nil: plain TCP.
	TLSConfig *tls.Config
	// Inline, if set, names the requests that may run on their
	// connection's reader when they are alone on it (nothing pipelined
	// behind them, every earlier answer written): the reader calls the
	// handler and writes the answer itself, saving two goroutine
	// hand-offs. The connection reads nothing while such a handler runs,
	// so ClientGone is not closed during it: name only requests whose
	// handlers end soon (bounded by a request timeout). Nil: none.
	Inline func(*http.Request) bool
	Logger *slog.Logger

	mu struct {
		sync.Mutex
		lis      []net.Listener
		conns    map[*conn]struct{}
		shutdown bool
	}
	// bodies counts the request body bytes held (BodyBudget).
	bodies byteBudget
	// refusing counts connections over MaxConns being answered.
	refusing atomic.Int32
	h2lis    *chanListener
	tls      tlsState
	wg       sync.WaitGroup
	// work hands requests to idle handler goroutines.
	work Workers
}

// H2Server serves the HTTP/2 connections a Server hands over: an
// *http.Server, or internal/http2's lean server.
type H2Server interface {
	Serve(l net.Listener) error
	Shutdown(ctx context.Context) error
}

func (s *Server) maxPipeline() int {
	if s.MaxPipeline <= 0 {
		return 128
	}
	return s.MaxPipeline
}

func (s *Server) maxAnswerBytes() int64 {
	if s.MaxAnswerBytes <= 0 {
		return 16 << 20
	}
	return s.MaxAnswerBytes
}

func (s *Server) writeTimeout() time.Duration {
	if s.WriteTimeout <= 0 {
		return 30 * time.Second
	}
	return s.WriteTimeout
}

func (s *Server) maxBody() int64 {
	if s.MaxBodyBytes <= 0 {
		return 8 << 20
	}
	return s.MaxBodyBytes
}

func (s *Server) bodyBudget() int64 {
	if s.BodyBudget <= 0 {
		return 256 << 20
	}
	return s.BodyBudget
}

func (s *Server) maxConns() int {
	if s.MaxConns <= 0 {
		return 4096
	}
	return s.MaxConns
}

func (s *Server) maxHeader() int {
	if s.MaxHeaderBytes <= 0 {
		return 64 << 10
	}
	return s.MaxHeaderBytes
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout <= 0 {
		return 2 * time.Minute
	}
	return s.IdleTimeout
}

func (s *Server) headerTimeout() time.Duration {
	if s.ReadHeaderTimeout <= 0 {
		return 10 * time.Second
	}
	return s.ReadHeaderTimeout
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("http1: server closed")

// h2Preface opens every HTTP/2 connection (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Serve accepts connections on l until Shutdown or an accept error that
// is not temporary. A temporary one (a timeout; EMFILE, ENFILE, ENOBUFS,
// ENOMEM: the node is out of file descriptors or memory for a moment) is
// retried after a pause that doubles from 5 ms to 1 s.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.lis = append(s.mu.lis, l)
	if s.mu.conns == nil {
		s.mu.conns = map[*conn]struct{}{}
		s.work = NewWorkers()
		s.bodies.limit = s.bodyBudget()
	}
	if s.H2 != nil && s.h2lis == nil {
		s.h2lis = &chanListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: l.Addr()}
		h2 := s.H2
		go func() { _ = h2.Serve(s.h2lis) }()
	}
	var tlsCfg *tls.Config
	if s.TLSConfig != nil {
		tlsCfg = s.serverTLS()
	}
	s.mu.Unlock()
	var pause time.Duration // after a temporary accept error
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.shutdown
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			if temporaryAccept(err) {
				// Out of file descriptors or memory, for instance: the
				// connections that end free them, so wait and go on
				// serving rather than leave the port unserved.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				if s.Logger != nil && pause >= 40*time.Millisecond {
					s.Logger.Warn("http1: accept failed; retrying", "err", err, "in", pause)
				}
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		if tlsCfg != nil {
			nc = tls.Server(nc, tlsCfg)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.mu.shutdown {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		full := len(s.mu.conns) >= s.maxConns()
		if !full {
			s.mu.conns[c] = struct{}{}
		}
		s.wg.Add(1)
		s.mu.Unlock()
		if full {
			if s.refusing.Add(1) > maxRefusing {
				// A flood: close without an answer.
				s.refusing.Add(-1)
				s.wg.Done()
				nc.Close()
				continue
			}
			go s.refuse(nc)
			continue
		}
		go c.serve()
	}
}

// temporaryAccept reports whether an accept error passes with time: a
// timeout, or a want of file descriptors, buffers or memory, or a
// connection that ended before it was accepted.
func temporaryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// maxRefusing bounds the connections over MaxConns being answered 503 at
// once; beyond it they are closed at once.
const maxRefusing = 64

// refuse answers a connection over MaxConns 503 and closes it.
func (s *Server) refuse(nc net.Conn) {
	defer s.wg.Done()
	defer s.refusing.Add(-1)
	s.logf("http1: too many connections", "remote", nc.RemoteAddr().String())
	w := &responseWriter{header: make(http.Header, 2)}
	w.header.Set("Retry-After", "1")
	reject(s, w, http.StatusServiceUnavailable, "too many connections")
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	head, body := w.serialize(true, 1)
	if _, err := (&net.Buffers{head, body}).WriteTo(nc); err == nil {
		lingerClose(nc, nil)
		return
	}
	nc.Close()
}

// Shutdown stops accepting, stops reading new requests, lets the
// requests already read finish and their answers be written, then closes
// every connection. When ctx ends first, every connection is closed at
// once, the contexts of its requests canceled, and Shutdown returns
// ctx.Err() without waiting for handlers that do not return.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.mu.shutdown = true
	for _, l := range s.mu.lis {
		l.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	var h2err error
	if s.H2 != nil {
		h2err = s.H2.Shutdown(ctx)
		if s.h2lis != nil {
			s.h2lis.Close()
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return h2err
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.cancel()
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *Server) logf(msg string, args ...any) {
	if s.Logger != nil {
		s.Logger.Debug(msg, args...)
	}
}
