package http1

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// inlineServer serves echo with every request allowed inline, counting
// the requests offered to Inline.
func inlineServer(t *testing.T, h http.Handler) (string, *atomic.Int64) {
	var asked atomic.Int64
	s := &Server{Handler: h, Inline: func(*http.Request) bool { asked.Add(1); return true }}
	return start(t, s), &asked
}

// One request at a time on a keep-alive connection: each runs inline and
// is answered; a pipelined burst after them still runs and answers in
// order; so does a request that waits for 100 Continue, and a last one
// that closes the connection.
func TestInlineLoneRequests(t *testing.T) {
	addr, asked := inlineServer(t, http.HandlerFunc(echo))
	c, br := raw(t, addr, "")
	for i, req := range []string{
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz",
		"HEAD /c HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		io.WriteString(c, req)
		r, err := readAnswer(t, br, strings.HasPrefix(req, "HEAD"))
		if err != nil || r.Status != 200 {
			t.Fatalf("request %d: %v %v", i, r, err)
		}
		if i == 1 && string(r.Body) != "PUT /b xyz" {
			t.Fatalf("request %d: body %q", i, r.Body)
		}
	}
	if asked.Load() != 3 {
		t.Fatalf("Inline asked %d times, want 3 (each lone request)", asked.Load())
	}
	io.WriteString(c, "GET /p1?sleep=100 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\nGET /p3?sleep=20 HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"GET /p1 ", "GET /p2 ", "GET /p3 "} {
		if r := mustAnswer(t, br); r.Status != 200 || string(r.Body) != want {
			t.Fatalf("pipelined: got %d %q, want %q", r.Status, r.Body, want)
		}
	}
	io.WriteString(c, "PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("interim answer %q %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	if r := mustAnswer(t, br); r.Status != 200 || string(r.Body) != "PUT /e hello" {
		t.Fatalf("after 100 Continue: %d %q", r.Status, r.Body)
	}
	io.WriteString(c, "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if r := mustAnswer(t, br); string(r.Body) != "GET /last " || r.Header.Get("Connection") != "close" {
		t.Fatalf("closing request: %q %v", r.Body, r.Header)
	}
	if _, err := readAnswer(t, br, false); err == nil {
		t.Fatal("connection stayed open after Connection: close")
	}
}

// A handler that panics inline is answered 500 and closes the connection;
// one that aborts closes it without an answer.
func TestInlinePanicAndAbort(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	})
	addr, _ := inlineServer(t, h)
	_, br := raw(t, addr, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := mustAnswer(t, br); r.Status != 500 || r.Header.Get("Connection") != "close" {
		t.Fatalf("panic: %d %v", r.Status, r.Header)
	}
	_, br = raw(t, addr, "GET /abort HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := readAnswer(t, br, false); err == nil {
		t.Fatal("aborted handler answered")
	}
}

// net/http's client, keep-alive, sequential requests on a few connections
// at once: every answer matches its request.
func TestInlineNetHTTPClient(t *testing.T) {
	addr, asked := inlineServer(t, http.HandlerFunc(echo))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := 0; i < 50; i++ {
				body := strings.Repeat("v", i*100)
				resp, err := client.Post("http://"+addr+"/k", "text/plain", strings.NewReader(body))
				if err != nil {
					done <- err
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != "POST /k "+body {
					done <- io.ErrUnexpectedEOF
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if asked.Load() == 0 {
		t.Fatal("no request was offered inline")
	}
}
