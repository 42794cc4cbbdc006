package server

import (
	"crypto/tls"
	"errors"

	"github.com/cairn-db/cairn/internal/security"
	"github.com/prometheus/client_golang/prometheus"
)

// TLS of a node (docs/security.md): Config.TLS for the client port
// (HTTP/1.1 and HTTP/2 by ALPN), Config.PeerTLS for mutual TLS between
// nodes. Both are off when their files are empty.

// validateTLS reports a TLS configuration that cannot work.
func (c Config) validateTLS() error {
	t := c.TLS
	if !t.IsZero() && (t.Cert == "" || t.Key == "") {
		return errors.New("server: TLS on the client port needs --tls-cert and --tls-key")
	}
	if _, err := security.ParseClientAuth(string(c.ClientAuth)); err != nil {
		return err
	}
	if c.ClientAuth != "" && c.ClientAuth != security.ClientAuthNone && (t.Cert == "" || t.CA == "") {
		return errors.New("server: --tls-client-auth needs --tls-cert, --tls-key and --tls-ca")
	}
	p := c.PeerTLS
	if !p.IsZero() && (p.Cert == "" || p.Key == "" || p.CA == "") {
		return errors.New("server: peer TLS needs all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca")
	}
	return nil
}

// clientTLS is the client port's TLS configuration (nil: plain).
func (c Config) clientTLS() (*tls.Config, error) {
	if c.TLS.IsZero() {
		return nil, nil
	}
	return security.ServerTLS(c.TLS, c.ClientAuth, "h2", "http/1.1")
}

// peerTLS is the peer port's pair of configurations (nil: plain).
func (c Config) peerTLS() (server, client *tls.Config, err error) {
	if c.PeerTLS.IsZero() {
		return nil, nil, nil
	}
	return security.PeerTLS(c.PeerTLS)
}

// registerTLSMetrics exports the refused handshakes of both ports.
func registerTLSMetrics(reg *prometheus.Registry, s *Server) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_http_tls_handshake_failures_total", Help: "Client connections closed because their TLS handshake failed (plain HTTP, untrusted or missing certificate).",
	}, func() float64 {
		if s.http == nil {
			return 0
		}
		return float64(s.http.TLSHandshakeFailures())
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_tls_refused_total", Help: "Incoming peer connections refused by mutual TLS (no node certificate of the cluster CA).",
	}, func() float64 { return float64(s.tr.Stats().TLSRefused) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cairn_peer_tls_dial_failures_total", Help: "Outgoing peer connections whose TLS handshake failed.",
	}, func() float64 { return float64(s.tr.Stats().TLSDialFailed) }))
}
