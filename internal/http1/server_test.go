package http1

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echo answers with the method, path and body, after sleeping ?sleep=ms.
func echo(w http.ResponseWriter, r *http.Request) {
	if ms, _ := strconv.Atoi(r.URL.Query().Get("sleep")); ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprintf(w, "read: %v", err)
		return
	}
	w.Header().Set("X-Len", strconv.FormatInt(r.ContentLength, 10))
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
}

func start(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != ErrServerClosed {
			t.Errorf("serve returned %v", err)
		}
	})
	return l.Addr().String()
}

// raw sends text on a new connection and returns a reader of the answers.
func raw(t *testing.T, addr, text string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func readAnswer(t *testing.T, br *bufio.Reader, head bool) (*Response, error) {
	t.Helper()
	cl := &call{head: head}
	err := readResponse(br, cl)
	if err == errLastAnswer {
		err = nil
	}
	return &cl.resp, err
}

func mustAnswer(t *testing.T, br *bufio.Reader) *Response {
	t.Helper()
	r, err := readAnswer(t, br, false)
	if err != nil {
		t.Fatalf("reading answer: %v", err)
	}
	return r
}

func TestPipelinedAnswersInOrder(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	// The first request is the slowest: its answer must still come first.
	_, br := raw(t, addr, "GET /a?sleep=200 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"PUT /b?sleep=50 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"+
		"DELETE /c HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"GET /a ", "PUT /b xyz", "DELETE /c "} {
		r := mustAnswer(t, br)
		if r.Status != 200 || string(r.Body) != want {
			t.Fatalf("got %d %q, want 200 %q", r.Status, r.Body, want)
		}
		if r.Header.Get("Date") == "" {
			t.Fatalf("no Date header: %v", r.Header)
		}
	}
}

func TestPipelinedRequestsRunConcurrently(t *testing.T) {
	const n = 10
	var entered sync.WaitGroup
	entered.Add(n)
	all := make(chan struct{})
	go func() { entered.Wait(); close(all) }()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		select {
		case <-all: // every request is in its handler at once
			io.WriteString(w, r.URL.Path)
		case <-time.After(5 * time.Second):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})
	addr := start(t, &Server{Handler: h})
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	_, br := raw(t, addr, sb.String())
	for i := 0; i < n; i++ {
		r := mustAnswer(t, br)
		if r.Status != 200 || string(r.Body) != "/"+strconv.Itoa(i) {
			t.Fatalf("answer %d: %d %q (handlers did not run concurrently?)", i, r.Status, r.Body)
		}
	}
}

func TestMaxPipelineBoundsHandlers(t *testing.T) {
	var running, peak atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
	})
	addr := start(t, &Server{Handler: h, MaxPipeline: 3})
	var sb strings.Builder
	for i := 0; i < 12; i++ {
		sb.WriteString("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	_, br := raw(t, addr, sb.String())
	for i := 0; i < 12; i++ {
		mustAnswer(t, br)
	}
	// The bound counts queued answers, plus the one being written.
	if p := peak.Load(); p > 4 || p < 2 {
		t.Fatalf("peak concurrent handlers %d with MaxPipeline 3", p)
	}
}

func TestExpectContinue(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	c, br := raw(t, addr, "PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("interim answer %q %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("interim answer not ended: %q", l)
	}
	io.WriteString(c, "hello")
	if r := mustAnswer(t, br); r.Status != 200 || string(r.Body) != "PUT /e hello" {
		t.Fatalf("got %d %q", r.Status, r.Body)
	}
}

func TestChunkedBody(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	_, br := raw(t, addr, "PUT /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: v\r\n\r\n"+
		"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	r := mustAnswer(t, br)
	if r.Status != 200 || string(r.Body) != "PUT /c abcde" || r.Header.Get("X-Len") != "5" {
		t.Fatalf("got %d %q %v", r.Status, r.Body, r.Header)
	}
	if r := mustAnswer(t, br); string(r.Body) != "GET /next " {
		t.Fatalf("request after a chunked body: %q", r.Body)
	}
}

func TestMalformedRequests(t *testing.T) {
	cases := map[string]struct {
		text   string
		status int
	}{
		"TE and CL":          {"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		"two lengths":        {"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
		"bad length":         {"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n", 400},
		"unknown coding":     {"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		"no host":            {"GET / HTTP/1.1\r\n\r\n", 400},
		"two hosts":          {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		"http/2.0 text":      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		"garbage":            {"hello\r\n\r\n", 400},
		"bad method":         {"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		"folding":            {"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  2\r\n\r\n", 400},
		"space before colon": {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
		"bad chunk":          {"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
		"bare LF chunk line": {"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\n0\r\n\r\n", 400},
		"chunk size bare LF": {"PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400},
		"leading empty line": {"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		"lengths as written": {"PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 03\r\n\r\nabc", 400},
		"control in value":   {"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400},
		"TE in HTTP/1.0":     {"PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		"connect":            {"CONNECT A:A HTTP/1.1\r\nHost: A:A\r\n\r\n", 501},
		"expect other":       {"PUT / HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx", 417},
		"header too large":   {"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431},
		"bad target":         {"GET nopath HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	}
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	addr := start(t, &Server{Handler: h, Reject: func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":"bad","message":%q}`, msg)
	}})
	for name, tc := range cases {
		_, br := raw(t, addr, tc.text+"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
		r := mustAnswer(t, br)
		if r.Status != tc.status || !strings.Contains(string(r.Body), `"error":"bad"`) || r.Header.Get("Connection") != "close" {
			t.Errorf("%s: %d %q %v, want %d with a JSON body and Connection: close", name, r.Status, r.Body, r.Header, tc.status)
		}
		if _, err := readAnswer(t, br, false); err == nil {
			t.Errorf("%s: the connection went on after a malformed request", name)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("handler called %d times for malformed requests", n)
	}
}

func TestBodyOverLimit(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 10 {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		echo(w, r)
	})
	addr := start(t, &Server{Handler: h, MaxBodyBytes: 10})
	c, br := raw(t, addr, "PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
	go io.WriteString(c, strings.Repeat("z", 100000)) // the client goes on sending
	r := mustAnswer(t, br)
	if r.Status != 413 || r.Header.Get("Connection") != "close" {
		t.Fatalf("got %d %v", r.Status, r.Header)
	}
}

// A chunked body over the limit is answered 413 by the server as soon as
// a chunk passes it, without calling the handler (which would read a
// made-up body of the limit's size) and without reading further.
func TestChunkedBodyOverLimitRefused(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); echo(w, r) })
	addr := start(t, &Server{Handler: h, MaxBodyBytes: 10})
	c, br := raw(t, addr, "PUT /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n"+strings.Repeat("y", 8)+"\r\n20\r\n")
	go io.WriteString(c, strings.Repeat("y", 32)+"\r\n0\r\n\r\n") // the client goes on sending
	if r := mustAnswer(t, br); r.Status != 413 || r.Header.Get("Connection") != "close" {
		t.Fatalf("chunked over the limit: %d %q %v", r.Status, r.Body, r.Header)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("handler called %d times for a chunked body over the limit", n)
	}
}

func TestHeadKeepsContentLength(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	})
	addr := start(t, &Server{Handler: h})
	_, br := raw(t, addr, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r, err := readAnswer(t, br, true)
	if err != nil || r.Status != 200 || r.Header.Get("Content-Length") != "5" || len(r.Body) != 0 {
		t.Fatalf("HEAD: %v %d %v %q", err, r.Status, r.Header, r.Body)
	}
	if r := mustAnswer(t, br); string(r.Body) != "hello" {
		t.Fatalf("GET after HEAD: %q", r.Body)
	}
}

func TestNoContentHasNoBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		io.WriteString(w, "dropped")
	})
	addr := start(t, &Server{Handler: h})
	_, br := raw(t, addr, "DELETE / HTTP/1.1\r\nHost: x\r\n\r\nDELETE / HTTP/1.1\r\nHost: x\r\n\r\n")
	for i := 0; i < 2; i++ {
		r := mustAnswer(t, br)
		if r.Status != 204 || len(r.Body) != 0 || r.Header.Get("Content-Length") != "" {
			t.Fatalf("204: %v %q", r.Header, r.Body)
		}
	}
}

func TestHTTP10ClosesUnlessKeepAlive(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	_, br := raw(t, addr, "GET /one HTTP/1.0\r\n\r\nGET /two HTTP/1.0\r\n\r\n")
	if r := mustAnswer(t, br); string(r.Body) != "GET /one " || r.Header.Get("Connection") != "close" {
		t.Fatalf("1.0: %q %v", r.Body, r.Header)
	}
	if _, err := readAnswer(t, br, false); err == nil {
		t.Fatal("HTTP/1.0 connection stayed open")
	}
	_, br = raw(t, addr, "GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /two HTTP/1.0\r\n\r\n")
	if r := mustAnswer(t, br); r.Header.Get("Connection") != "keep-alive" {
		t.Fatalf("1.0 keep-alive: %v", r.Header)
	}
	if r := mustAnswer(t, br); string(r.Body) != "GET /two " {
		t.Fatalf("second 1.0 request: %q", r.Body)
	}
}

func TestPanicAnswers500(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
	})
	addr := start(t, &Server{Handler: h})
	_, br := raw(t, addr, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := mustAnswer(t, br); r.Status != 500 || r.Header.Get("Connection") != "close" {
		t.Fatalf("panic: %d %v", r.Status, r.Header)
	}
}

func TestNetHTTPClientAndH2C(t *testing.T) {
	h2 := &http.Server{Handler: http.HandlerFunc(echo), Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	addr := start(t, &Server{Handler: http.HandlerFunc(echo), H2: h2})
	// HTTP/1.1 through net/http, reusing one connection.
	c1 := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := 0; i < 3; i++ {
		resp, err := c1.Post("http://"+addr+"/p", "text/plain", strings.NewReader("v"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 1 || string(b) != "POST /p v"+strconv.Itoa(i) {
			t.Fatalf("HTTP/1.1: %s %q", resp.Proto, b)
		}
	}
	// HTTP/2 with prior knowledge on the same port.
	tr := &http.Transport{Protocols: new(http.Protocols), TLSClientConfig: &tls.Config{}}
	tr.Protocols.SetUnencryptedHTTP2(true)
	c2 := &http.Client{Transport: tr}
	resp, err := c2.Get("http://" + addr + "/h2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(b) != "GET /h2 " {
		t.Fatalf("h2c: %s %q", resp.Proto, b)
	}
	tr.CloseIdleConnections()
	c1.CloseIdleConnections()
}

func TestShutdownFinishesPendingRequests(t *testing.T) {
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(200 * time.Millisecond)
		io.WriteString(w, "finished")
	})
	s := &Server{Handler: h}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	_, br := raw(t, l.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if r := mustAnswer(t, br); string(r.Body) != "finished" {
		t.Fatalf("pending request after shutdown: %d %q", r.Status, r.Body)
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepts after shutdown")
	}
}

func TestClientPipelinesAgainstServer(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(echo)})
	c, err := Dial(context.Background(), addr, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 200; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			body := "v" + strconv.Itoa(g)
			resp, err := c.Do(context.Background(), &Request{Method: "PUT", Path: "/k" + strconv.Itoa(g) + "?sleep=" + strconv.Itoa(g%5), Body: []byte(body)})
			if err != nil {
				errs <- err
				return
			}
			if want := "PUT /k" + strconv.Itoa(g) + " " + body; resp.Status != 200 || string(resp.Body) != want {
				errs <- fmt.Errorf("got %d %q, want %q", resp.Status, resp.Body, want)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestClientAgainstNetHTTPServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echo))
	defer srv.Close()
	c, err := Dial(context.Background(), strings.TrimPrefix(srv.URL, "http://"), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			resp, err := c.Do(context.Background(), &Request{Method: "GET", Path: "/x" + strconv.Itoa(g)})
			if err != nil || string(resp.Body) != "GET /x"+strconv.Itoa(g)+" " {
				t.Errorf("%d: %v %v", g, err, resp)
			}
		}(g)
	}
	wg.Wait()
	resp, err := c.Do(context.Background(), &Request{Method: "HEAD", Path: "/h"})
	if err != nil || resp.Status != 200 || len(resp.Body) != 0 {
		t.Fatalf("HEAD: %v %v", err, resp)
	}
}

func TestClientFailsPendingOnClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(c, 20)) // read a little, never answer
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), l.Addr().String(), 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Do(ctx, &Request{Method: "GET", Path: "/"}); err == nil || ctx.Err() != nil {
		t.Fatalf("Do on a connection the server closed: %v (ctx %v)", err, ctx.Err())
	}
	if !c.Failed() {
		t.Fatal("connection not marked failed")
	}
	if _, err := c.Do(ctx, &Request{Method: "GET", Path: "/"}); err == nil {
		t.Fatal("Do on a failed connection succeeded")
	}
}

// With RequestTimeout, every request's context carries a deadline
// RequestTimeout (plus at most a fiftieth) after it was read, and it ends
// when the connection breaks.
func TestRequestDeadline(t *testing.T) {
	type seen struct {
		left time.Duration
		ok   bool
	}
	got := make(chan seen, 4)
	s := &Server{RequestTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, ok := r.Context().Deadline()
		got <- seen{time.Until(dl), ok}
	})}
	addr := start(t, s)
	_, br := raw(t, addr, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		g := <-got
		if !g.ok || g.left <= 9*time.Second || g.left > 10*time.Second+200*time.Millisecond {
			t.Fatalf("request %d: deadline %v away (set %v), want 10 s to 10.2 s", i, g.left, g.ok)
		}
	}

	ended := make(chan error, 1)
	s2 := &Server{RequestTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		ended <- r.Context().Err()
	})}
	c, _ := raw(t, start(t, s2), "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("context ended with %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context did not end when its connection broke")
	}
}

// A plain path is taken as the URL url.ParseRequestURI would make of it.
func TestPlainPathMatchesParse(t *testing.T) {
	for _, target := range []string{"/", "/v1/kv/00001234", "/v0/entity", "/a-b_c.d~e/", "//x",
		"/v1/kv/a%2Fb", "/v1/kv/a?b=c", "/v1/kv/a#f", "*", "http://h/x", "/a b", "/ä", "/a;b", "/a:b"} {
		u, err := url.ParseRequestURI(target)
		if !plainPath([]byte(target)) {
			continue
		}
		if err != nil {
			t.Fatalf("%q is plain but does not parse: %v", target, err)
		}
		want := url.URL{Path: target}
		if *u != want || u.EscapedPath() != target {
			t.Fatalf("%q parses as %#v, the plain path as %#v", target, *u, want)
		}
	}
	for _, target := range []string{"/v1/kv/a%2Fb", "/v1/kv/a?b=c", "*", "/a b", "/ä", "/a;b", ""} {
		if plainPath([]byte(target)) {
			t.Fatalf("%q taken as plain", target)
		}
	}
}

// A body read whole is handed over without a copy and still reads as one.
func TestBodyBytes(t *testing.T) {
	got := make(chan []byte, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := r.Body.(*Body)
		if !ok {
			t.Errorf("body is %T", r.Body)
			return
		}
		all, err := io.ReadAll(r.Body)
		if err != nil || string(all) != string(b.Bytes()) {
			t.Errorf("read %q (%v), Bytes %q", all, err, b.Bytes())
		}
		got <- b.Bytes()
	})}
	_, br := raw(t, start(t, s), "PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b := <-got; string(b) != "hello" {
		t.Fatalf("body %q", b)
	}
}
