package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ClientAuth is what a node's client port asks of client certificates.
type ClientAuth string

// Client certificate policies of the client port (--tls-client-auth).
const (
	// ClientAuthNone asks for no client certificate (the default).
	ClientAuthNone ClientAuth = "none"
	// ClientAuthVerifyIfGiven verifies a client certificate against the
	// CA when the client presents one, and accepts clients without.
	ClientAuthVerifyIfGiven ClientAuth = "verify-if-given"
	// ClientAuthRequire refuses the handshake of a client without a
	// certificate signed by the CA.
	ClientAuthRequire ClientAuth = "require"
)

// ParseClientAuth parses a --tls-client-auth value ("" is none).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch a := ClientAuth(s); a {
	case "":
		return ClientAuthNone, nil
	case ClientAuthNone, ClientAuthVerifyIfGiven, ClientAuthRequire:
		return a, nil
	}
	return "", fmt.Errorf("security: client auth %q: want none, verify-if-given or require", s)
}

// Files names the PEM files of one side of a TLS connection.
type Files struct {
	// Cert and Key: this side's certificate (chain) and private key.
	Cert, Key string
	// CA: the certificate(s) the other side's certificate must chain to.
	CA string
}

// IsZero reports whether no file is named (TLS off).
func (f Files) IsZero() bool { return f == Files{} }

// ServerTLS is the configuration of a node's client port: it presents
// f.Cert and, as auth asks, verifies client certificates against f.CA.
// protos are offered by ALPN in order (e.g. "h2", "http/1.1").
func ServerTLS(f Files, auth ClientAuth, protos ...string) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("security: the client port's TLS needs a certificate and a key (--tls-cert, --tls-key)")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("security: load %s: %w", f.Cert, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: protos}
	switch auth {
	case ClientAuthNone, "":
		return cfg, nil
	case ClientAuthVerifyIfGiven:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("security: client auth %q: want none, verify-if-given or require", auth)
	}
	if f.CA == "" {
		return nil, fmt.Errorf("security: client auth %s needs the CA that signs client certificates (--tls-ca)", auth)
	}
	if cfg.ClientCAs, err = LoadPool(f.CA); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ClientTLS is the configuration of a client of a node's client port: it
// trusts the certificates of f.CA (the system's roots when empty) and
// presents f.Cert when given (for a node that requires client
// certificates).
func ClientTLS(f Files) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := LoadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("security: a client certificate needs both its file and its key")
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("security: load %s: %w", f.Cert, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// PeerTLS is the configuration of a node's peer port, both ways: as a
// server it requires a client certificate, as a client it verifies the
// server's; either way the certificate must chain to f.CA and be a node
// certificate (usable for both server and client authentication). The
// client side verifies the server's name against the address it dials.
func PeerTLS(f Files) (server, client *tls.Config, err error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, nil, errors.New("security: peer TLS needs a certificate, its key and the cluster CA (--peer-tls-cert, --peer-tls-key, --peer-tls-ca)")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("security: load %s: %w", f.Cert, err)
	}
	pool, err := LoadPool(f.CA)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, VerifyConnection: requireNode,
	}
	client = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		RootCAs: pool, VerifyConnection: requireNode,
	}
	return server, client, nil
}

// ErrNotNode: the peer's certificate, though signed by the CA, is not a
// node certificate (it lacks server or client usage).
var ErrNotNode = errors.New("security: the peer's certificate is not a node certificate (it needs both server and client usage)")

// requireNode refuses a peer whose leaf certificate is not a node's. It
// runs after the chain was verified.
func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return ErrNotNode
	}
	if !IsNodeCert(cs.PeerCertificates[0]) {
		return fmt.Errorf("%w: %s", ErrNotNode, cs.PeerCertificates[0].Subject.CommonName)
	}
	return nil
}

// CertNodeID is the node id a node certificate names (IssueNode's
// common name "node-N"); 0 when it names none (a certificate issued
// otherwise).
func CertNodeID(c *x509.Certificate) uint64 {
	s, ok := strings.CutPrefix(c.Subject.CommonName, "node-")
	if !ok {
		return 0
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// IsNodeCert reports whether c allows both server and client
// authentication (as IssueNode's do).
func IsNodeCert(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return true
	}
	return slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}

// LoadPool reads the PEM certificates of file into a pool.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("security: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("security: %s holds no PEM certificate", file)
	}
	return pool, nil
}
