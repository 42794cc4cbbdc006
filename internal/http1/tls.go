package http1

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// TLS on the server's port (Server.TLSConfig): every accepted connection
// is wrapped in tls.Server and its handshake runs first thing in the
// connection's goroutine, under the header timeout counted from the
// accept. ALPN offers "h2" (when Server.H2 is set) and "http/1.1": a
// connection that negotiates h2 goes to Server.H2 as the *tls.Conn it is
// (net/http's HTTP/2 server takes it from there); any other is served
// here as HTTP/1.1. A plain-HTTP request is answered 400 with a JSON
// body saying the port speaks HTTPS (as net/http does), then closed. A
// handshake that fails (a plain-HTTP request, a
// client that does not trust the certificate, one without the client
// certificate the configuration requires) closes the connection: the
// server counts it (TLSHandshakeFailures) and logs at most one line per
// tlsLogEvery.

// tlsLogEvery is the least time between two logged handshake failures.
const tlsLogEvery = 10 * time.Second

// tlsState counts failed handshakes and rate-limits their log lines.
type tlsState struct {
	failures atomic.Uint64
	// lastLog is the unix nanos of the last logged failure.
	lastLog atomic.Int64
}

// TLSHandshakeFailures is the number of connections closed because
// their TLS handshake failed.
func (s *Server) TLSHandshakeFailures() uint64 { return s.tls.failures.Load() }

// serverTLS is the configuration connections are served with: the
// caller's, with ALPN's protocols filled in when it names none.
func (s *Server) serverTLS() *tls.Config {
	cfg := s.TLSConfig.Clone()
	if len(cfg.NextProtos) == 0 {
		if s.H2 != nil {
			cfg.NextProtos = []string{"h2", "http/1.1"}
		} else {
			cfg.NextProtos = []string{"http/1.1"}
		}
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg
}

// handshake completes the TLS handshake of a TLS connection (others pass
// through) and hands one that negotiated h2 to the HTTP/2 server. It
// reports whether the connection is to be served as HTTP/1.1 here; if
// not, the connection was closed or handed over.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	_ = tc.SetDeadline(time.Now().Add(c.s.headerTimeout()))
	ctx, cancel := context.WithTimeout(c.ctx, c.s.headerTimeout())
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		c.s.tlsFailed(tc.RemoteAddr(), err)
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			// A plain-HTTP client: tell it in words it can read.
			_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(re.Conn, plainToTLS)
		}
		tc.Close()
		return false
	}
	_ = tc.SetWriteDeadline(time.Time{})
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		return true
	}
	if c.s.H2 == nil || c.s.h2lis == nil {
		tc.Close()
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	c.handOver(tc)
	return false
}

// plainToTLS answers a plain-HTTP request on a TLS port.
const plainToTLS = "HTTP/1.0 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" +
	`{"error":"tls_required","message":"this port speaks HTTPS: use https:// (and the cluster's CA)"}` + "\n"

// looksLikeHTTP reports whether a connection's first bytes read as an
// HTTP/1 method rather than a TLS record.
func looksLikeHTTP(b []byte) bool {
	for _, m := range []string{"GET ", "POST", "PUT ", "HEAD", "DELE", "PATC", "OPTI", "PRI "} {
		if string(b[:min(len(b), 4)]) == m[:min(len(b), 4)] {
			return true
		}
	}
	return false
}

func (s *Server) tlsFailed(remote net.Addr, err error) {
	s.tls.failures.Add(1)
	now := time.Now().UnixNano()
	last := s.tls.lastLog.Load()
	if now-last < int64(tlsLogEvery) || !s.tls.lastLog.CompareAndSwap(last, now) {
		return
	}
	if s.Logger != nil {
		s.Logger.Warn("http1: TLS handshake failed (further failures are counted, logged at most every 10s)",
			"remote", remote.String(), "err", err, "failures", s.tls.failures.Load())
	}
}

// DialTLS is Dial over TLS with cfg (its ServerName defaults to addr's
// host; ALPN asks for http/1.1). The handshake completes before it
// returns.
func DialTLS(ctx context.Context, addr string, maxInFlight int, cfg *tls.Config) (*Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	cfg.NextProtos = []string{"http/1.1"}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newClientConn(nc, addr, maxInFlight), nil
}
