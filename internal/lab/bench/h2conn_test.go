package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The coalescing connection delivers every write whole and in order,
// whatever the concurrency, and reports a failed socket to later writes.
func TestCoalescingConnKeepsOrder(t *testing.T) {
	a, b := net.Pipe()
	c := newCoalescingConn(a)
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&got, b); close(done) }()
	var mu sync.Mutex // writers take turns, as the Transport's do
	var want bytes.Buffer
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				msg := fmt.Sprintf("<%d:%d:%s>", g, i, strings.Repeat("x", i))
				mu.Lock()
				want.WriteString(msg)
				if _, err := c.Write([]byte(msg)); err != nil {
					t.Error(err)
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	// Close after the writer drained: wait until the reader has it all.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		pending := len(c.buf)
		c.mu.Unlock()
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	c.Close()
	<-done
	if got.String() != want.String() {
		t.Fatalf("got %d bytes, want %d (in order)", got.Len(), want.Len())
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Fatal("write after close succeeded")
	}
}

// The HTTP/2 driver speaks h2c to a server that accepts prior knowledge.
func TestHTTP2DriverPuts(t *testing.T) {
	var puts, proto2 atomic.Int64
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut && len(b) == 100 {
			puts.Add(1)
		}
		if r.ProtoMajor == 2 {
			proto2.Add(1)
		}
		w.WriteHeader(http.StatusCreated)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	d, err := newHTTPDriver(DriverConfig{Target: "http://" + l.Addr().String(), Conns: 2, HTTP2: true,
		Timeout: 5 * time.Second, Route: RouteFixed})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	putFifty(t, d)
	if puts.Load() != 50 || proto2.Load() != 50 {
		t.Fatalf("puts %d, over HTTP/2 %d; want 50", puts.Load(), proto2.Load())
	}
}

// Over TLS the driver agrees on HTTP/2 by ALPN, through the coalescing
// connection.
func TestHTTP2DriverPutsOverTLS(t *testing.T) {
	var puts, proto2 atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut && len(b) == 100 && r.TLS != nil {
			puts.Add(1)
		}
		if r.ProtoMajor == 2 {
			proto2.Add(1)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	d, err := newHTTPDriver(DriverConfig{Target: srv.URL, TLS: &tls.Config{RootCAs: pool}, Conns: 2, HTTP2: true,
		Timeout: 5 * time.Second, Route: RouteFixed})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	putFifty(t, d)
	if puts.Load() != 50 || proto2.Load() != 50 {
		t.Fatalf("puts over TLS %d, over HTTP/2 %d; want 50", puts.Load(), proto2.Load())
	}
}

// putFifty sends 50 puts of 100 bytes at once through d.
func putFifty(t *testing.T, d Driver) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := d.Put(context.Background(), i, []byte(fmt.Sprint("k", i)), make([]byte, 100)); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
}
