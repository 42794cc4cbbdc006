package http1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// connCount is the number of HTTP/1 connections s serves.
func connCount(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A client that pipelines requests and never reads the answers: the
// server stops starting handlers once the answers waiting on the
// connection pass MaxAnswerBytes, and closes the connection when a write
// makes no progress for WriteTimeout, dropping the answers.
func TestUnreadAnswersBounded(t *testing.T) {
	const n, size = 48, 1 << 20
	var calls atomic.Int32
	value := strings.Repeat("v", size)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, value)
	})
	s := &Server{Handler: h, MaxAnswerBytes: 2 << 20, WriteTimeout: 300 * time.Millisecond}
	addr := start(t, s)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		// A small receive window, so the kernel does not take the answers.
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", n)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to close the connection nobody reads", func() bool { return connCount(s) == 0 })
	t.Logf("%d handlers ran", calls.Load())
	if got := calls.Load(); got > n*3/4 {
		t.Fatalf("%d of %d handlers ran for a connection whose answers are not read (MaxAnswerBytes 2 MiB, answers 1 MiB)", got, n)
	}
}

// A body is allocated as its bytes arrive, not from its Content-Length.
func TestBodyAllocatedAsItArrives(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), MaxBodyBytes: 64 << 20}
	addr := start(t, s)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const conns = 4
	for i := 0; i < conns; i++ {
		raw(t, addr, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n0123456789")
	}
	waitFor(t, "the bodies' first bytes", func() bool { return s.bodies.used.Load() >= conns*minGrow })
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("%d MiB allocated for %d bodies of 10 bytes (announced 64 MiB each)", grew>>20, conns)
	}
}

// Bodies held across connections count against BodyBudget: beyond it a
// request is answered 503 with Retry-After; the budget comes back when a
// body's connection fails.
func TestBodyBudget(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), BodyBudget: 64 << 10, MaxBodyBytes: 1 << 20}
	addr := start(t, s)
	slow, _ := raw(t, addr, "PUT /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n"+strings.Repeat("s", 40000))
	waitFor(t, "the slow body to hold the budget", func() bool { return s.bodies.used.Load() == 64<<10 })
	_, br := raw(t, addr, "PUT /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	r := mustAnswer(t, br)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || r.Header.Get("Connection") != "close" {
		t.Fatalf("over the body budget: %d %q %v, want 503 with Retry-After", r.Status, r.Body, r.Header)
	}
	slow.Close()
	waitFor(t, "the budget to come back", func() bool { return s.bodies.used.Load() == 0 })
	_, br = raw(t, addr, "PUT /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if r := mustAnswer(t, br); r.Status != 200 || string(r.Body) != "PUT /b hello" {
		t.Fatalf("after the budget came back: %d %q", r.Status, r.Body)
	}
	if u := s.bodies.used.Load(); u != 0 {
		t.Fatalf("%d body bytes still counted after the answers", u)
	}
}

// Connections beyond MaxConns are answered 503 and closed.
func TestMaxConns(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), MaxConns: 2}
	addr := start(t, s)
	for i := 0; i < 2; i++ {
		_, br := raw(t, addr, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := mustAnswer(t, br); r.Status != 200 {
			t.Fatalf("connection %d: %d", i, r.Status)
		}
	}
	_, br := raw(t, addr, "GET /third HTTP/1.1\r\nHost: x\r\n\r\n")
	r := mustAnswer(t, br)
	if r.Status != 503 || r.Header.Get("Retry-After") == "" || r.Header.Get("Connection") != "close" {
		t.Fatalf("connection over MaxConns: %d %q %v", r.Status, r.Body, r.Header)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection over MaxConns not closed: %v", err)
	}
}

// Slowloris: a connection that sends a few bytes of a request and stops
// is closed after the header timeout, not the idle timeout.
func TestHeaderTimeoutFromFirstByte(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: time.Minute}
	addr := start(t, s)
	for _, partial := range []string{"G", "GET", "GET / HTTP/1.1\r\nHo"} {
		c, br := raw(t, addr, partial)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("after %q: %v, want the server to close the connection", partial, err)
		}
	}
	// The same for the second request of a connection.
	c, br := raw(t, addr, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGE")
	mustAnswer(t, br)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after a partial second request: %v, want the server to close the connection", err)
	}
}

// Shutdown returns ctx's error at its deadline, even when a handler does
// not return.
func TestShutdownDeadline(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	entered := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-stuck
	})
	s := &Server{Handler: h}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	c, br := raw(t, l.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown past its deadline: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return at its context's deadline")
	}
	// The connection was closed.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(br).ReadByte(); err == nil {
		t.Fatal("connection still open after Shutdown's deadline")
	}
}
