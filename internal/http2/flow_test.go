package http2

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// connCount is how many connections s serves.
func connCount(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// waitConns waits up to d for s to serve n connections.
func waitConns(t *testing.T, s *Server, n int, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); connCount(s) != n; {
		if time.Now().After(end) {
			t.Fatalf("the server still serves %d connections after %v, want %d", connCount(s), d, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bigAnswer serves an answer of n random bytes, written in pieces; done
// is closed when the handler returns.
func bigAnswer(n int, done chan struct{}) (http.Handler, []byte) {
	big := make([]byte, n)
	_, _ = rand.Read(big)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		for b := big; len(b) > 0; {
			k := min(len(b), 10000)
			if _, err := w.Write(b[:k]); err != nil {
				return
			}
			b = b[k:]
		}
	}), big
}

// serveLocal serves s on a port of its own; the server is shut down at
// the end.
func serveLocal(t *testing.T, s *Server) string {
	t.Helper()
	l := listenLocal(t)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return l.Addr().String()
}

var getBlock = headerBlockOf(":method", "GET", ":path", "/big", ":scheme", "http", ":authority", "x")

// A client that opens no stream window (SETTINGS_INITIAL_WINDOW_SIZE 0,
// no WINDOW_UPDATE) for a large answer: the stream is reset once its
// answer waited WriteTimeout for the window, the handler returns, and
// the connection, idle then, is closed: the client holds nothing.
func TestClosedStreamWindowResets(t *testing.T) {
	done := make(chan struct{})
	h, _ := bigAnswer(1<<20, done)
	s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond}
	addr := serveLocal(t, s)
	nc, fr := rawConn(t, addr)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: getBlock, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var reset time.Duration
	for reset == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM for an answer stalled on a closed window after %v: %v", time.Since(start), err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			if len(f.Data()) > 0 {
				t.Fatalf("%d bytes of DATA sent beyond a window of 0", len(f.Data()))
			}
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 || f.ErrCode != http2.ErrCodeCancel {
				t.Fatalf("reset %v, want stream 1 CANCEL", f)
			}
			reset = time.Since(start)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v before the stalled stream was reset", f)
		}
	}
	if reset < 400*time.Millisecond || reset > 6*time.Second {
		t.Fatalf("stream reset after %v, want about WriteTimeout (500ms)", reset)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the handler still runs after its stream was reset")
	}
	waitConns(t, s, 0, 3*time.Second)
}

// A client that never gives back the connection's window: once the
// answers waited WriteTimeout for it, the connection ends with a GOAWAY
// (FLOW_CONTROL_ERROR) and is closed, long before IdleTimeout.
func TestClosedConnWindowEndsConn(t *testing.T) {
	done := make(chan struct{})
	h, _ := bigAnswer(1<<20, done)
	s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute}
	addr := serveLocal(t, s)
	nc, fr := rawConn(t, addr)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	// The clock starts before the request goes: the server cannot wait
	// for the window before it has the request.
	start := time.Now()
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: getBlock, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	waitConns(t, s, 1, 3*time.Second)
	var got int
	var goAway *http2.GoAwayFrame
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if goAway == nil {
				t.Fatalf("connection ended after %v without a GOAWAY: %v", time.Since(start), err)
			}
			break
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			got += len(f.Data())
		case *http2.GoAwayFrame:
			goAway = f
		}
	}
	if took := time.Since(start); took < 400*time.Millisecond || took > 6*time.Second {
		t.Fatalf("connection ended after %v, want about WriteTimeout (500ms)", took)
	}
	if goAway.ErrCode != http2.ErrCodeFlowControl || goAway.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v, want FLOW_CONTROL_ERROR with last stream 1", goAway)
	}
	if got != defaultWindow {
		t.Fatalf("%d bytes of DATA sent, want the connection's initial window (%d)", got, defaultWindow)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the handler still runs after its connection ended")
	}
	waitConns(t, s, 0, 3*time.Second)
}

// A client that opens its windows slowly but steadily (a pause shorter
// than WriteTimeout before each update) gets its whole answer, however
// long it takes in all: the stream's window paced, or the connection's.
// Each pause is 300 ms against a WriteTimeout of 2 s, so that a loaded
// machine stretching a pause does not reach the bound; the thirteen or
// more pauses make the whole answer take longer than 1.5 × WriteTimeout.
func TestSlowWindowGetsWholeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial uint32 // SETTINGS_INITIAL_WINDOW_SIZE
		stream  bool   // the stream's window is given back too
	}{{"stream window", 16 << 10, true}, {"connection window", 8 << 20, false}} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			h, big := bigAnswer(256<<10+77, done)
			s := &Server{Handler: h, WriteTimeout: 2 * time.Second}
			addr := serveLocal(t, s)
			nc, fr := rawConn(t, addr)
			_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
			if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: tc.initial}); err != nil {
				t.Fatal(err)
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: getBlock, EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var got []byte
			owed := 0 // bytes received and not yet given back
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("after %d bytes in %v: %v", len(got), time.Since(start), err)
				}
				switch f := f.(type) {
				case *http2.RSTStreamFrame:
					t.Fatalf("a slowly read answer was reset after %d bytes in %v: %v", len(got), time.Since(start), f)
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY after %d bytes of a slowly read answer in %v: %v", len(got), time.Since(start), f)
				}
				d, ok := f.(*http2.DataFrame)
				if !ok || d.StreamID != 1 {
					continue
				}
				got = append(got, d.Data()...)
				if d.StreamEnded() {
					break
				}
				if owed += len(d.Data()); owed >= 16<<10 {
					time.Sleep(300 * time.Millisecond)
					if tc.stream && fr.WriteWindowUpdate(1, uint32(owed)) != nil || fr.WriteWindowUpdate(0, uint32(owed)) != nil {
						t.Fatal("window update")
					}
					owed = 0
				}
			}
			if !bytes.Equal(got, big) {
				t.Fatalf("got %d bytes, want %d", len(got), len(big))
			}
			if took := time.Since(start); took < 3*s.WriteTimeout/2 {
				t.Fatalf("the answer took %v: the client's pauses (4 s or more) did not hold it past WriteTimeout", took)
			}
		})
	}
}
