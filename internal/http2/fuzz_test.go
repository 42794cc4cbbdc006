package http2

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// seen is what a handler sees of a request.
func seen(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	var keys []string
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %q %q %d %d|", r.Method, r.URL.Path, r.URL.RawQuery, r.RequestURI, r.ProtoMajor, r.ContentLength)
	for _, k := range keys {
		if k == "Content-Length" && r.ContentLength >= 0 {
			continue // net/http keeps it for HTTP/2 only when the client sent it
		}
		fmt.Fprintf(&b, "%s=%q;", k, r.Header[k])
	}
	fmt.Fprintf(&b, "|%q", body)
	return b.String()
}

// TestDifferentialWithNetHTTP sends the same requests to this server and
// to net/http's HTTP/2 server: their handlers must see the same requests,
// and the clients the same answers.
func TestDifferentialWithNetHTTP(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen(r)
		w.Header().Set("X-Seen-Len", fmt.Sprint(len(s)))
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		if r.URL.Query().Get("status") != "" {
			var code int
			fmt.Sscan(r.URL.Query().Get("status"), &code)
			w.WriteHeader(code)
		}
		_, _ = io.WriteString(w, s)
	})
	lean := start(t, &Server{Handler: handler})
	l := listenLocal(t)
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	std := &http.Server{Handler: handler, Protocols: protos}
	go func() { _ = std.Serve(l) }()
	defer std.Close()
	c := h2c()
	type reqCase struct {
		method, target, body string
		header               [][2]string
	}
	cases := []reqCase{
		{"GET", "/v1/kv/a", "", nil},
		{"PUT", "/v1/kv/a%2Fb?x=1&y=%20", "value", [][2]string{{"Authorization", "Bearer x"}, {"X-Cairn-Index-A", "1"}}},
		{"POST", "/v0/entity?id=7&replicas=2/3", strings.Repeat("z", 70000), nil},
		{"DELETE", "/v1/kv/k?if_version=3", "", [][2]string{{"Cookie", "a=1"}, {"Accept", "x"}, {"Accept", "y"}}},
		{"HEAD", "/v1/kv/h", "", nil},
		{"GET", "/?status=204", "", nil},
		{"GET", "/?status=404", "", nil},
		{"PATCH", "/p/..%2e/q", "{}", [][2]string{{"Content-Type", "application/json"}}},
	}
	for _, tc := range cases {
		var out [2]string
		for i, addr := range []string{lean, l.Addr().String()} {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, "http://"+addr+tc.target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "cairn.test"
			for _, h := range tc.header {
				req.Header.Add(h[0], h[1])
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.target, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out[i] = fmt.Sprintf("%d %q %q %q %q", resp.StatusCode, resp.Header.Values("X-Multi"), resp.Header.Get("X-Seen-Len"), resp.Header.Get("Content-Type"), got)
		}
		if out[0] != out[1] {
			t.Errorf("%s %s:\n lean:     %s\n net/http: %s", tc.method, tc.target, out[0], out[1])
		}
	}
}

// FuzzFrames: whatever frames follow the preface, the server neither
// panics nor hangs: it closes the connection or keeps serving, and the
// connection's goroutines end when the client goes.
func FuzzFrames(f *testing.F) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	_ = fr.WriteSettings()
	req := headerBlockOf(":method", "PUT", ":path", "/x", ":scheme", "http", ":authority", "a")
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: req, EndHeaders: true})
	_ = fr.WriteData(1, true, []byte("body"))
	f.Add(b.Bytes())
	b.Reset()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: req[:3], EndHeaders: false})
	_ = fr.WriteContinuation(3, true, req[3:])
	_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
	_ = fr.WriteWindowUpdate(0, 100)
	_ = fr.WritePing(false, [8]byte{1})
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frames []byte) {
		s := &Server{Handler: http.HandlerFunc(echo), MaxBodyBytes: 1 << 10}
		cli, srv := net.Pipe()
		done := make(chan struct{})
		go func() {
			s.ServeConn(srv, true)
			close(done)
		}()
		go func() { _, _ = io.Copy(io.Discard, cli) }()
		_ = cli.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(cli, preface)
		_, _ = cli.Write(frames)
		cli.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("connection not closed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
}

// FuzzPlainPath: the fast path gives the URL url.ParseRequestURI gives.
func FuzzPlainPath(f *testing.F) {
	for _, s := range []string{"/v1/kv/a", "/a/../b", "/a%2Fb", "/x?y", "//h/p", "/~._-", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !plainPath(p) {
			return
		}
		u, err := url.ParseRequestURI(p)
		if err != nil {
			t.Fatalf("%q: fast path accepts what ParseRequestURI refuses: %v", p, err)
		}
		fast := url.URL{Path: p}
		if *u != fast {
			t.Fatalf("%q: ParseRequestURI %#v, fast path %#v", p, *u, fast)
		}
	})
}
