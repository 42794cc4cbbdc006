package http2

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// start serves h on a fresh port; the server is shut down at the end.
func start(t *testing.T, s *Server) string {
	t.Helper()
	l := listenLocal(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// h2c is a client speaking HTTP/2 without TLS (prior knowledge).
func h2c() *http.Client {
	return &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}, Timeout: 20 * time.Second}
}

func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Proto", r.Proto)
	w.Header().Set("X-Path", r.URL.Path)
	w.Header().Set("X-Query", r.URL.RawQuery)
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("X-Auth", r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(201)
	_, _ = w.Write(body)
}

func TestRequestsAndAnswers(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	c := h2c()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte(i)}, i*37)
			req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/v1/kv/k%d?x=%d", addr, i, i), bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer t")
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode != 201, resp.ProtoMajor != 2:
				errs <- fmt.Errorf("status %d proto %s", resp.StatusCode, resp.Proto)
			case !bytes.Equal(got, body):
				errs <- fmt.Errorf("request %d: body of %d bytes, want %d", i, len(got), len(body))
			case resp.Header.Get("X-Method") != "PUT" || resp.Header.Get("X-Proto") != "HTTP/2.0" ||
				resp.Header.Get("X-Path") != fmt.Sprintf("/v1/kv/k%d", i) || resp.Header.Get("X-Query") != fmt.Sprintf("x=%d", i) ||
				resp.Header.Get("X-Host") != addr || resp.Header.Get("X-Auth") != "Bearer t":
				errs <- fmt.Errorf("request %d: header %v", i, resp.Header)
			case resp.ContentLength != int64(len(body)):
				errs <- fmt.Errorf("content-length %d, want %d", resp.ContentLength, len(body))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A large answer goes out within the client's flow-control windows (far
// smaller than it) and in parts.
func TestLargeAnswerAndBody(t *testing.T) {
	big := make([]byte, 5<<20+123)
	_, _ = rand.Read(big)
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			echo(w, r)
			return
		}
		for b := big; len(b) > 0; {
			n := min(len(b), 10000)
			_, _ = w.Write(b[:n])
			b = b[n:]
		}
	})})
	c := h2c()
	for i := 0; i < 3; i++ {
		resp, err := c.Get("http://" + addr + "/big")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("got %d bytes (%v), want %d", len(got), err, len(big))
		}
	}
	// A body of 3 MiB (over the stream's window) arrives whole.
	body := big[:3<<20]
	resp, err := c.Post("http://"+addr+"/echo", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("echo: %d bytes, want %d", len(got), len(body))
	}
}

// Flush sends what was written so far: the client reads it before the
// handler ends.
func TestFlushStreams(t *testing.T) {
	release := make(chan struct{})
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "second\n")
	})})
	resp, err := h2c().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first part %q %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestLimits(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		echo(w, r)
	}), MaxBodyBytes: 1000, Logger: nil})
	c := h2c()
	resp, err := c.Post("http://"+addr+"/", "text/plain", bytes.NewReader(make([]byte, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("big body: %d", resp.StatusCode)
	}
	resp, err = c.Get("http://" + addr + "/panic")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("panic: %d", resp.StatusCode)
	}
	// The connection still serves.
	resp, err = c.Post("http://"+addr+"/", "text/plain", strings.NewReader("ok"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "ok" {
		t.Fatalf("after: %q", got)
	}
}

// A client that cancels its request resets the stream: the handler's
// context ends.
func TestClientResetCancelsHandler(t *testing.T) {
	canceled := make(chan struct{})
	started := make(chan struct{})
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(10 * time.Second):
		}
	})})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	go func() { <-started; cancel() }()
	_, err := h2c().Do(req)
	if err == nil {
		t.Fatal("no error")
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not canceled")
	}
}

// Shutdown lets a running request finish and answer.
func TestShutdownGraceful(t *testing.T) {
	started := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})}
	l := listenLocal(t)
	go func() { _ = s.Serve(l) }()
	got := make(chan string, 1)
	go func() {
		resp, err := h2c().Get("http://" + l.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "done" {
		t.Fatalf("answer %q", g)
	}
}

// TLS with ALPN h2: the request carries the connection's TLS state.
func TestTLS(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "no tls", 500)
			return
		}
		_, _ = io.WriteString(w, r.TLS.NegotiatedProtocol)
	})}
	ts := &httptest.Server{Listener: listenLocal(t), Config: &http.Server{}, EnableHTTP2: true}
	ts.StartTLS() // for its certificate
	cert := ts.TLS.Certificates
	ts.Close()
	l := tls.NewListener(listenLocal(t), &tls.Config{Certificates: cert, NextProtos: []string{"h2"}})
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			tc := nc.(*tls.Conn)
			if tc.Handshake() != nil || !s.ServeConn(tc, false) {
				nc.Close()
			}
		}
	}()
	defer l.Close()
	defer func() { _ = s.Shutdown(context.Background()) }()
	c := &http.Client{Transport: &http2.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "h2" {
		t.Fatalf("answer %q", b)
	}
}

// rawConn dials the server and speaks frames.
func rawConn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, preface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return nc, fr
}

func headerBlockOf(fields ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// untilGoAway reads frames until a GOAWAY (returned) or the end.
func untilGoAway(fr *http2.Framer) *http2.GoAwayFrame {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// Protocol errors end the connection with a GOAWAY naming the error.
func TestProtocolErrors(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	req := headerBlockOf(":method", "GET", ":path", "/", ":scheme", "http", ":authority", "x")
	cases := map[string]func(fr *http2.Framer) error{
		"even stream id": func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: req, EndStream: true, EndHeaders: true})
		},
		"decreasing stream id": func(fr *http2.Framer) error {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: req, EndStream: true, EndHeaders: true})
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: req, EndStream: true, EndHeaders: true})
		},
		"data on idle stream": func(fr *http2.Framer) error { return fr.WriteData(7, true, []byte("x")) },
		"push promise": func(fr *http2.Framer) error {
			return fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: req, EndHeaders: true})
		},
		"window overflow": func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1<<31-1) },
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			_, fr := rawConn(t, addr)
			if err := send(fr); err != nil {
				t.Fatal(err)
			}
			if g := untilGoAway(fr); g == nil || g.ErrCode == http2.ErrCodeNo {
				t.Fatalf("GOAWAY %v", g)
			}
		})
	}
}

// More streams than announced are refused; the others are answered.
func TestStreamLimitRefuses(t *testing.T) {
	block := make(chan struct{})
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-block
	}), MaxConcurrentStreams: 2})
	defer close(block)
	_, fr := rawConn(t, addr)
	req := headerBlockOf(":method", "GET", ":path", "/", ":scheme", "http", ":authority", "x")
	for _, id := range []uint32{1, 3, 5} {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: req, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := f.(*http2.RSTStreamFrame); ok {
			if r.StreamID != 5 || r.ErrCode != http2.ErrCodeRefusedStream {
				t.Fatalf("reset %v", r)
			}
			return
		}
	}
}
