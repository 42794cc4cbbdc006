package http2

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
)

// Server serves HTTP/2 connections.
type Server struct {
	Handler http.Handler
	// MaxConcurrentStreams per connection. Default 1000.
	MaxConcurrentStreams uint32
	// MaxBodyBytes bounds one request body. Default 8 MiB.
	MaxBodyBytes int64
	// BodyBudget bounds the request body bytes held across connections.
	// Default 256 MiB.
	BodyBudget int64
	// MaxHeaderBytes bounds a request's decoded header list. Default 64 KiB.
	MaxHeaderBytes int
	// IdleTimeout closes a connection that sends no frame for that long
	// while the server owes it no answer (requests left half sent are
	// reset), and bounds the drain after a GOAWAY (requests still half
	// sent then are reset). Default 2 min.
	IdleTimeout time.Duration
	// WriteTimeout bounds one write to the socket, and how long an answer
	// waits for the client to open its flow-control window (each window
	// update restarts the wait). Default 30 s.
	WriteTimeout time.Duration
	// Reject writes the answer to a request the server refuses itself
	// (a body over MaxBodyBytes or the budget, header fields too large,
	// a content-length its body does not hold, a handler's panic), as
	// the HTTP/1.1 server's Reject does; nil: plain text.
	Reject func(w http.ResponseWriter, status int, msg string)
	Logger *slog.Logger

	mu struct {
		sync.Mutex
		lis      []net.Listener
		conns    map[*conn]struct{}
		shutdown bool
	}
	wg     sync.WaitGroup
	bodies atomic.Int64
	work   http1.Workers
	once   sync.Once
}

func (s *Server) init() {
	s.once.Do(func() {
		s.work = http1.NewWorkers()
		// Under the lock: a caller may count connections (or shut
		// down) while Serve, in another goroutine, is starting.
		s.mu.Lock()
		s.mu.conns = map[*conn]struct{}{}
		s.mu.Unlock()
	})
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return 1000
	}
	return s.MaxConcurrentStreams
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

func (s *Server) writeTimeout() time.Duration {
	if s.WriteTimeout <= 0 {
		return 30 * time.Second
	}
	return s.WriteTimeout
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("http2: server closed")

// Serve serves every connection l accepts (each must start with the
// client's connection preface; a *tls.Conn must have completed its
// handshake) until l fails or Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.lis = append(s.mu.lis, l)
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.shutdown
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			return err
		}
		if !s.ServeConn(nc, false) {
			nc.Close()
		}
	}
}

// ServeConn serves nc in new goroutines; false if the server is shut down
// (nc is not closed then). wait: serve in the calling goroutine.
func (s *Server) ServeConn(nc net.Conn, wait bool) bool {
	s.init()
	c := newConn(s, nc)
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		return false
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if wait {
		c.serve()
	} else {
		go c.serve()
	}
	return true
}

// Shutdown stops accepting, sends every connection a GOAWAY, lets the
// streams already opened finish and their answers be written (a request
// still half sent IdleTimeout after the GOAWAY is reset), then closes the
// connections. When ctx ends first the connections are closed at once
// and ctx.Err() returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.mu.shutdown = true
	for _, l := range s.mu.lis {
		l.Close()
	}
	for c := range s.mu.conns {
		c.goAway()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.kill()
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

// takeBody reserves n bytes of the body budget.
func (s *Server) takeBody(n int64) bool {
	if s.bodies.Add(n) > s.bodyBudget() {
		s.bodies.Add(-n)
		return false
	}
	return true
}

func (s *Server) giveBody(n int64) {
	if n != 0 {
		s.bodies.Add(-n)
	}
}
