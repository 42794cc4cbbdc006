package http1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/security"
)

// tlsFiles makes a CA and a certificate for 127.0.0.1 in a temporary
// directory.
func tlsFiles(t *testing.T) (srv *tls.Config, ca string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := security.InitCA(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := security.IssueNode(dir, 1, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca = filepath.Join(dir, security.CACertFile)
	srv, err = security.ServerTLS(security.Files{Cert: p.Cert, Key: p.Key}, security.ClientAuthNone)
	if err != nil {
		t.Fatal(err)
	}
	return srv, ca
}

func startTLS(t *testing.T, logs io.Writer) (s *Server, addr string, client *tls.Config) {
	t.Helper()
	srvCfg, ca := tlsFiles(t)
	h2 := &http.Server{Handler: http.HandlerFunc(echo), Protocols: new(http.Protocols)}
	h2.Protocols.SetHTTP2(true)
	s = &Server{Handler: http.HandlerFunc(echo), H2: h2, TLSConfig: srvCfg,
		ReadHeaderTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	addr = start(t, s)
	client, err := security.ClientTLS(security.Files{CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	return s, addr, client
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// ALPN picks HTTP/2 or HTTP/1.1 over TLS on one port; both reach their
// handler, and the pipelining client speaks HTTP/1.1 over TLS.
func TestTLSALPN(t *testing.T) {
	_, addr, ccfg := startTLS(t, io.Discard)
	tr2 := &http.Transport{TLSClientConfig: ccfg.Clone(), ForceAttemptHTTP2: true}
	defer tr2.CloseIdleConnections()
	resp, body := get(t, &http.Client{Transport: tr2}, "https://"+addr+"/two")
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || body != "GET /two " {
		t.Fatalf("h2 over TLS: %s %+v %q", resp.Proto, resp.TLS != nil, body)
	}
	tr1 := &http.Transport{TLSClientConfig: ccfg.Clone(), TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	defer tr1.CloseIdleConnections()
	for i := 0; i < 2; i++ {
		resp, body = get(t, &http.Client{Transport: tr1}, "https://"+addr+"/one")
		if resp.ProtoMajor != 1 || resp.TLS == nil || body != "GET /one " {
			t.Fatalf("HTTP/1.1 over TLS: %s %q", resp.Proto, body)
		}
	}
	c, err := DialTLS(context.Background(), addr, 4, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Do(context.Background(), &Request{Method: "POST", Path: "/pipe", Body: []byte("x")})
	if err != nil || r.Status != 200 || string(r.Body) != "POST /pipe x" {
		t.Fatalf("DialTLS: %v %+v", err, r)
	}
}

// A plain-HTTP request on the TLS port fails its handshake; the server
// logs one line for a burst of them and keeps serving TLS clients.
func TestTLSPlainHTTPRefused(t *testing.T) {
	var logs syncBuffer
	s, addr, ccfg := startTLS(t, &logs)
	for i := 0; i < 5; i++ {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/plain")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("plain HTTP answered %d", resp.StatusCode)
			}
		}
	}
	// A raw plain request gets a 400 naming the problem, and the close.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(bufio.NewReader(nc))
	nc.Close()
	if !bytes.HasPrefix(b, []byte("HTTP/1.0 400")) || !bytes.Contains(b, []byte("tls_required")) {
		t.Fatalf("plain request answered: %q", b)
	}
	if n := s.TLSHandshakeFailures(); n < 6 {
		t.Fatalf("%d handshake failures counted, want at least 6", n)
	}
	if n := strings.Count(logs.String(), "TLS handshake failed"); n != 1 {
		t.Fatalf("%d log lines for 6 failures, want 1:\n%s", n, logs.String())
	}
	tr := &http.Transport{TLSClientConfig: ccfg.Clone()}
	defer tr.CloseIdleConnections()
	if resp, body := get(t, &http.Client{Transport: tr}, "https://"+addr+"/after"); resp.StatusCode != 200 || body != "GET /after " {
		t.Fatalf("after the refusals: %d %q", resp.StatusCode, body)
	}
}

// A client that does not trust the server's CA fails; a client that
// starts a handshake and stops is closed after the header timeout.
func TestTLSUntrustedAndStalledHandshake(t *testing.T) {
	s, addr, _ := startTLS(t, io.Discard)
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	if _, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/"); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
	old := &tls.Config{MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true}
	if c, err := tls.Dial("tcp", addr, old); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "\x16\x03\x01") // the start of a ClientHello, then nothing
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server answered a partial ClientHello")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a stalled handshake past its header timeout")
	}
	if s.TLSHandshakeFailures() == 0 {
		t.Fatal("failures not counted")
	}
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
