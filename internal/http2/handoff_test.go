package http2

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
	"golang.org/x/net/http2"
)

// listenLocal listens on a free port of 127.0.0.1 between 40000 and
// 41999: the tests use no port outside that range.
func listenLocal(t testing.TB) net.Listener {
	t.Helper()
	const first, n = 40000, 2000
	start := int(time.Now().UnixNano() % n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", first+(start+i)%n))
		if err == nil {
			return l
		}
	}
	t.Fatalf("no free port between %d and %d", first, first+n-1)
	return nil
}

// HTTP/2 connections that the HTTP/1 server hands over (prior knowledge,
// sniffed from the preface) count against its MaxConns for as long as
// they are served: a client cannot open more connections than MaxConns
// by speaking HTTP/2.
func TestHandedOverConnsCountAgainstMaxConns(t *testing.T) {
	h2 := &Server{Handler: http.HandlerFunc(echo)}
	s := &http1.Server{Handler: http.HandlerFunc(echo), H2: h2, MaxConns: 2}
	l := listenLocal(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	addr := l.Addr().String()
	req := headerBlockOf(":method", "GET", ":path", "/x", ":scheme", "http", ":authority", "x")
	for i := 0; i < 2; i++ {
		_, fr := rawConn(t, addr)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: req, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		for answered := false; !answered; {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("h2c connection %d: %v", i, err)
			}
			_, answered = f.(*http2.MetaHeadersFrame)
		}
	}
	// Both HTTP/2 connections are open: a third connection is one too many.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, "GET /third HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a connection past MaxConns with two HTTP/2 connections open: %d %v, want 503 with Retry-After", resp.StatusCode, resp.Header)
	}
	// Shutdown ends the idle HTTP/2 connections (GOAWAY) and returns.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with HTTP/2 connections open: %v", err)
	}
	if err := <-done; err != http1.ErrServerClosed {
		t.Fatalf("serve: %v", err)
	}
}

// A connection whose client sends nothing more once its request was
// answered is closed after IdleTimeout, even if the reader was waiting
// for frames while the handler ran.
func TestIdleAfterAnswerClosed(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	}), IdleTimeout: 300 * time.Millisecond}
	l := listenLocal(t)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	nc, fr := rawConn(t, l.Addr().String())
	req := headerBlockOf(":method", "GET", ":path", "/x", ":scheme", "http", ":authority", "x")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: req, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	if g := untilGoAway(fr); g == nil {
		t.Fatalf("no GOAWAY %v after the answer; the idle connection stays open", time.Since(start))
	}
}

// A request whose body the client begins and never finishes is reset
// after IdleTimeout without a frame, and the connection goes away: a
// client cannot hold a connection with half-sent requests.
func TestHalfSentRequestReset(t *testing.T) {
	var calls atomic.Int32
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }),
		IdleTimeout: 300 * time.Millisecond}
	l := listenLocal(t)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	nc, fr := rawConn(t, l.Addr().String())
	req := headerBlockOf(":method", "PUT", ":path", "/x", ":scheme", "http", ":authority", "x")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: req, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, []byte("part of a body")); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(3 * time.Second))
	var reset bool
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection still open after 3 s with a half-sent request (reset %v): %v", reset, err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			reset = f.StreamID == 1 && f.ErrCode == http2.ErrCodeCancel
		case *http2.GoAwayFrame:
			if !reset || calls.Load() != 0 {
				t.Fatalf("GOAWAY; stream 1 reset %v, handler calls %d", reset, calls.Load())
			}
			return
		}
	}
}

// Shutdown of the HTTP/1 server that handed a connection over lets the
// requests already opened on it finish, a body still arriving included,
// before the connection goes away.
func TestHandedOverShutdownGraceful(t *testing.T) {
	s := &http1.Server{Handler: http.HandlerFunc(echo), H2: &Server{Handler: http.HandlerFunc(echo)}}
	l := listenLocal(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	_, fr := rawConn(t, l.Addr().String())
	req := headerBlockOf(":method", "PUT", ":path", "/x", ":scheme", "http", ":authority", "x")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: req, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// The answer to a PING sent after the request: the server has read
	// the request, so it is open when Shutdown starts (a request the
	// server has not read when its GOAWAY goes is not, and the client
	// retries it: RFC 9113, 6.8).
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	for acked := false; !acked; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		p, ok := f.(*http2.PingFrame)
		acked = ok && p.IsAck()
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		stopped <- s.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	if err := fr.WriteData(1, true, []byte("body")); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer to the request opened before Shutdown: %v", err)
		}
		if r, ok := f.(*http2.RSTStreamFrame); ok {
			t.Fatalf("the request opened before Shutdown was reset: %v", r)
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			if st := h.PseudoValue("status"); st != "201" {
				t.Fatalf("status %s", st)
			}
			break
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
