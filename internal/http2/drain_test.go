package http2

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// event is a frame the client read (its payload copied), or the error
// that ended the reading.
type event struct {
	typ    http2.FrameType
	stream uint32 // for a GOAWAY, its last stream id
	status string
	data   []byte
	end    bool
	code   http2.ErrCode
	err    error
}

// events reads fr's frames in a goroutine of its own.
func events(fr *http2.Framer) <-chan event {
	ch := make(chan event, 1000)
	go func() {
		defer close(ch)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				ch <- event{err: err}
				return
			}
			e := event{typ: f.Header().Type, stream: f.Header().StreamID}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				e.status, e.end = f.PseudoValue("status"), f.StreamEnded()
			case *http2.DataFrame:
				e.data, e.end = append([]byte(nil), f.Data()...), f.StreamEnded()
			case *http2.RSTStreamFrame:
				e.code = f.ErrCode
			case *http2.GoAwayFrame:
				e.code, e.stream = f.ErrCode, f.LastStreamID
			}
			ch <- e
		}
	}()
	return ch
}

// anyFrame: until's type for any frame.
const anyFrame http2.FrameType = 0xff

// until returns the first event of type typ (or anyFrame), failing the
// test on an error or after d.
func until(t *testing.T, ch <-chan event, typ http2.FrameType, d time.Duration) event {
	t.Helper()
	what := typ.String() + " frame"
	if typ == anyFrame {
		what = "frame"
	}
	timeout := time.After(d)
	for {
		select {
		case e := <-ch:
			if e.err != nil {
				t.Fatalf("waiting for a %s: %v", what, e.err)
			}
			if typ == anyFrame || e.typ == typ {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s within %v", what, d)
		}
	}
}

// synced returns once the server read what the client sent before: it
// answered a PING sent after it.
func synced(t *testing.T, fr *http2.Framer, ch <-chan event) {
	t.Helper()
	if err := fr.WritePing(false, [8]byte{'s', 'y', 'n', 'c'}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, http2.FramePing, 3*time.Second)
}

// answerOf collects stream id's answer; any reset or GOAWAY with an error
// fails the test.
func answerOf(t *testing.T, ch <-chan event, id uint32, d time.Duration) (string, []byte) {
	t.Helper()
	var status string
	var body []byte
	for {
		e := until(t, ch, anyFrame, d)
		switch {
		case e.typ == http2.FrameRSTStream:
			t.Fatalf("stream %d reset: %v", e.stream, e.code)
		case e.typ == http2.FrameGoAway && e.code != http2.ErrCodeNo:
			t.Fatalf("GOAWAY %v (last stream %d) before the answer to stream %d", e.code, e.stream, id)
		case e.stream != id:
		case e.typ == http2.FrameHeaders:
			status = e.status
		case e.typ == http2.FrameData:
			body = append(body, e.data...)
		}
		if e.stream == id && e.end {
			return status, body
		}
	}
}

var putBlock = headerBlockOf(":method", "PUT", ":path", "/up", ":scheme", "http", ":authority", "x")

// shutdownAsync shuts s down (waiting at most d) in a goroutine of its
// own.
func shutdownAsync(s *Server, d time.Duration) <-chan error {
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		stopped <- s.Shutdown(ctx)
	}()
	return stopped
}

// writeSlowly writes b in pieces of n bytes with a pause before each.
func writeSlowly(t *testing.T, nc net.Conn, b []byte, n int, pause time.Duration) {
	t.Helper()
	for len(b) > 0 {
		time.Sleep(pause)
		k := min(n, len(b))
		if _, err := nc.Write(b[:k]); err != nil {
			t.Fatal(err)
		}
		b = b[k:]
	}
}

// During the drain after Shutdown's GOAWAY, a client uploads the body of
// a request it opened before in small pieces, pauses of 150 ms between
// them, each cutting a frame in two (the first cut spanning the GOAWAY):
// the request is answered with its whole body.
func TestDrainSlowSplitUpload(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo), IdleTimeout: 5 * time.Second}
	nc, fr := rawConn(t, serveLocal(t, s))
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	ch := events(fr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: putBlock, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	synced(t, fr, ch)
	body := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), 12)
	var frames bytes.Buffer
	bf := http2.NewFramer(&frames, nil)
	for b := body; len(b) > 0; {
		k := min(len(b), 100)
		_ = bf.WriteData(1, k == len(b), b[:k])
		b = b[k:]
	}
	raw := frames.Bytes()
	// A frame's header and the start of its payload: the reader waits
	// for the rest when Shutdown begins.
	if _, err := nc.Write(raw[:40]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	stopped := shutdownAsync(s, 10*time.Second)
	if g := until(t, ch, http2.FrameGoAway, 3*time.Second); g.code != http2.ErrCodeNo || g.stream != 1 {
		t.Fatalf("GOAWAY %v, last stream %d: want NO_ERROR, 1", g.code, g.stream)
	}
	writeSlowly(t, nc, raw[40:], 40, 150*time.Millisecond)
	status, got := answerOf(t, ch, 1, 5*time.Second)
	if status != "201" || !bytes.Equal(got, body) {
		t.Fatalf("answer %s with %q, want 201 with the body sent", status, got)
	}
	// The drain ends with its last stream, not at its bound.
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Shutdown still waits 2s after the last answer")
	}
}

// A client that opens a stream after the GOAWAY (before reading it) and
// sends it a body: the stream is ignored, its DATA counted against the
// connection's window, and the request opened before the GOAWAY is
// still answered.
func TestDrainIgnoresStreamsAfterGoAway(t *testing.T) {
	var calls atomic.Int32
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		echo(w, r)
	}), IdleTimeout: 5 * time.Second}
	nc, fr := rawConn(t, serveLocal(t, s))
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	ch := events(fr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: putBlock, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, []byte("first ")); err != nil {
		t.Fatal(err)
	}
	synced(t, fr, ch)
	stopped := shutdownAsync(s, 10*time.Second)
	until(t, ch, http2.FrameGoAway, 3*time.Second)
	if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: putBlock, EndHeaders: true}) != nil ||
		fr.WriteData(3, false, []byte("not to be served")) != nil ||
		fr.WriteRSTStream(3, http2.ErrCodeCancel) != nil ||
		fr.WriteData(1, true, []byte("second")) != nil {
		t.Fatal("write")
	}
	status, got := answerOf(t, ch, 1, 5*time.Second)
	if status != "201" || string(got) != "first second" {
		t.Fatalf("answer %s with %q, want 201 with the body sent", status, got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests served, want the one opened before the GOAWAY", n)
	}
}

// A client that begins a request, then sends nothing more during a
// drain: the drain ends at its bound (IdleTimeout from its start), the
// request is reset and the connection closed — after Shutdown's GOAWAY
// (Shutdown returns) or the client's own.
func TestDrainBounded(t *testing.T) {
	for _, byClient := range []bool{false, true} {
		name := map[bool]string{false: "shutdown", true: "client goaway"}[byClient]
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }),
				IdleTimeout: time.Second}
			nc, fr := rawConn(t, serveLocal(t, s))
			_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
			ch := events(fr)
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: putBlock, EndHeaders: true}) != nil ||
				fr.WriteData(1, false, []byte("part of a body")) != nil {
				t.Fatal("write")
			}
			synced(t, fr, ch)
			start := time.Now()
			var stopped <-chan error
			if byClient {
				if err := fr.WriteGoAway(0, http2.ErrCodeNo, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				stopped = shutdownAsync(s, 10*time.Second)
			}
			until(t, ch, http2.FrameGoAway, 3*time.Second)
			if r := until(t, ch, http2.FrameRSTStream, 5*time.Second); r.stream != 1 || r.code != http2.ErrCodeCancel {
				t.Fatalf("reset of stream %d (%v), want stream 1 CANCEL", r.stream, r.code)
			}
			took := time.Since(start)
			if took < 800*time.Millisecond || took > 6*time.Second {
				t.Fatalf("the half-sent request was reset %v after the drain began, want about IdleTimeout (1s)", took)
			}
			for e := range ch {
				if e.err != nil {
					break
				}
			}
			waitConns(t, s, 0, 2*time.Second)
			if stopped != nil {
				if err := <-stopped; err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("%d requests served, want none", n)
			}
		})
	}
}
