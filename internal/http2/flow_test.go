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

// askBig serves s and sends it a GET of /big on a raw connection (for
// 20 s at most) that announces a stream window of initial.
func askBig(t *testing.T, s *Server, initial uint32) *http2.Framer {
	t.Helper()
	nc, fr := rawConn(t, serveLocal(t, s))
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: initial}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: getBlock, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return fr
}

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
			fr := askBig(t, s, tc.initial)
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

// A client that opens a byte of window now and then, well inside
// WriteTimeout each time, cannot hold an answer for ever: less than
// minProgress bytes went out within WriteTimeout of its first wait, so
// its stream is reset and its handler returns. Before, each update
// restarted the wait. The trickle is on the stream's window, or on the
// connection's with the stream's wide open.
func TestTrickledWindowResets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial uint32 // SETTINGS_INITIAL_WINDOW_SIZE
		stream  uint32 // the stream the updates are for (0: the connection)
	}{{"stream window", 0, 1}, {"connection window", 8 << 20, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			h, _ := bigAnswer(1<<20, done)
			s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute}
			fr := askBig(t, s, tc.initial)
			defer trickle(fr, func() error { return fr.WriteWindowUpdate(tc.stream, 1) })()
			waitReset(t, fr, true)
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				t.Fatal("the handler still runs after its stream was reset")
			}
		})
	}
}

// A client that reads many answers at once on one connection, giving
// back the connection's window steadily (16 KiB at a time, far more
// often than WriteTimeout) with its streams' windows wide open, gets
// them all: an answer that waits for the connection's window while the
// others' data goes out is not held by the client, and is not reset,
// though its own turn comes later than WriteTimeout.
func TestSteadyConnWindowManyAnswers(t *testing.T) {
	const streams, size = 16, 140 << 10
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 10000)
		for left := size; left > 0; left -= len(b) {
			if _, err := w.Write(b[:min(left, len(b))]); err != nil {
				return
			}
		}
	})
	s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute}
	nc, fr := rawConn(t, serveLocal(t, s))
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < streams; i++ {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: getBlock, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got := map[uint32]int{}
	ended, owed := 0, 0
	for ended < streams {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v, %d answers whole: %v", time.Since(start), ended, err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			t.Fatalf("a steadily read answer (stream %d, %d bytes of it) was reset after %v: %v", f.StreamID, got[f.StreamID], time.Since(start), f)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY after %v though the connection's window was given back steadily: %v", time.Since(start), f)
		case *http2.DataFrame:
			got[f.StreamID] += len(f.Data())
			if f.StreamEnded() {
				if got[f.StreamID] != size {
					t.Fatalf("stream %d: %d bytes, want %d", f.StreamID, got[f.StreamID], size)
				}
				ended++
			}
			if owed += len(f.Data()); owed >= 16<<10 {
				time.Sleep(20 * time.Millisecond)
				if fr.WriteWindowUpdate(0, uint32(owed)) != nil {
					t.Fatal("window update")
				}
				owed = 0
			}
		}
	}
}

// A client that gives back each byte of window at once, with a stream
// window smaller than the answer's parts, reading an answer its handler
// writes slowly (1000 bytes every 50 ms, less than 16 KiB within
// WriteTimeout), gets it whole: the answer waits for the window only a
// round trip at a time, and the time the handler takes is not a wait.
func TestPromptClientSlowHandlerGetsWholeAnswer(t *testing.T) {
	const parts, partSize = 40, 1000
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, partSize)
		for i := 0; i < parts; i++ {
			if _, err := w.Write(b); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	})
	s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute}
	fr := askBig(t, s, 600)
	start := time.Now()
	got := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", got, time.Since(start), err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			t.Fatalf("a promptly read answer was reset after %d bytes in %v: %v", got, time.Since(start), f)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY after %d bytes of a promptly read answer in %v: %v", got, time.Since(start), f)
		case *http2.DataFrame:
			got += len(f.Data())
			if f.StreamEnded() {
				if got != parts*partSize {
					t.Fatalf("%d bytes, want %d", got, parts*partSize)
				}
				return
			}
			if n := uint32(len(f.Data())); n > 0 {
				if fr.WriteWindowUpdate(1, n) != nil || fr.WriteWindowUpdate(0, n) != nil {
					t.Fatal("window update")
				}
			}
		}
	}
}

// An answer written in many small parts, each flushed, whose client
// opens just a part's window now and then, well inside WriteTimeout each
// time: every part goes out whole, yet the waits add up, and the stream
// is reset once they reach WriteTimeout with less than minProgress sent.
func TestTrickledSmallPartsReset(t *testing.T) {
	done := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		b := make([]byte, 100)
		for i := 0; i < 100000; i++ {
			if _, err := w.Write(b); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	s := &Server{Handler: h, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute}
	fr := askBig(t, s, 0)
	defer trickle(fr, func() error {
		if err := fr.WriteWindowUpdate(1, 100); err != nil {
			return err
		}
		return fr.WriteWindowUpdate(0, 100)
	})()
	waitReset(t, fr, false)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the handler still runs after its stream was reset")
	}
}

// trickle calls update every 100 ms, until the function it returns is
// called (which waits for it to stop) or update fails.
func trickle(fr *http2.Framer, update func() error) (stop func()) {
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if update() != nil {
					return
				}
			}
		}
	}()
	return func() { close(quit); <-stopped }
}

// waitReset reads fr until stream 1 is reset (CANCEL), failing after
// 10 s; noGoAway: a GOAWAY fails too (the connection's window was
// opened, so only the stream may end).
func waitReset(t *testing.T, fr *http2.Framer, noGoAway bool) {
	t.Helper()
	start := time.Now()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the trickled answer was not reset after %v: %v", time.Since(start), err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the trickled answer still held after 10 s (WriteTimeout 500ms)")
		}
		if f, ok := f.(*http2.GoAwayFrame); ok && noGoAway {
			t.Fatalf("GOAWAY %v: the connection's window was opened, the stream's answer should be reset", f)
		}
		if f, ok := f.(*http2.RSTStreamFrame); ok {
			if f.StreamID != 1 || f.ErrCode != http2.ErrCodeCancel {
				t.Fatalf("reset %v, want stream 1 CANCEL", f)
			}
			return
		}
	}
}
