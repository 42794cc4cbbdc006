package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// ErrInvalidOptions wraps every error of Options.Validate.
var ErrInvalidOptions = errors.New("cairn: invalid client options")

// Options of a Client. New fills their defaults (EnsureDefaults) and
// validates them once.
type Options struct {
	// Timeout of one operation including its retries. Default 5 s.
	Timeout time.Duration
	// HTTP is the client used; default one with keep-alive sized for 256
	// concurrent requests per node (idle connections closed after 1 min).
	HTTP *http.Client
	// TLS configures https:// endpoints of the default HTTP client: the
	// CA that signed the nodes' certificates (RootCAs) and, for nodes
	// that require one, a client certificate. LoadTLS builds it from
	// files. Ignored when HTTP is set (configure its transport instead).
	// Default nil: the system's roots.
	TLS *tls.Config
	// NoRetry disables retries (for tools that record every attempt).
	// Default false: retry until Timeout.
	NoRetry bool
	// AttemptTimeout bounds one attempt on one node, so a node that hangs
	// (paused, partitioned) costs at most this before the next node is
	// tried. Default Timeout/3, at least 500 ms.
	AttemptTimeout time.Duration
	// WriteRetryWindow bounds how long a write is retried under its
	// request id, from its first attempt, whatever Timeout says: a node
	// remembers a request id for a bounded time, and a retry after that
	// could apply the write again. Default and maximum
	// MaxWriteRetryWindow (30 s): a longer window is lowered to it.
	WriteRetryWindow time.Duration
}

// MaxWriteRetryWindow is the longest a write is retried (see
// Options.WriteRetryWindow). A node keeps a write's dedup record at least
// 105 s after its first attempt (with the default dedup TTL of 2
// minutes); this window and the node's own (30 s) stay well inside it.
const MaxWriteRetryWindow = 30 * time.Second

// EnsureDefaults returns a copy of o with every zero field set to its
// default, and WriteRetryWindow lowered to MaxWriteRetryWindow.
func (o Options) EnsureDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.WriteRetryWindow == 0 || o.WriteRetryWindow > MaxWriteRetryWindow {
		o.WriteRetryWindow = MaxWriteRetryWindow
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = max(o.Timeout/3, 500*time.Millisecond)
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute,
			TLSClientConfig: o.TLS.Clone(), ForceAttemptHTTP2: o.TLS != nil}}
	}
	return o
}

// Validate reports the first field of o (filled by EnsureDefaults) that
// is out of range.
func (o Options) Validate() error {
	switch {
	case o.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v: want more than 0", ErrInvalidOptions, o.Timeout)
	case o.AttemptTimeout <= 0:
		return fmt.Errorf("%w: AttemptTimeout %v: want more than 0", ErrInvalidOptions, o.AttemptTimeout)
	case o.WriteRetryWindow <= 0:
		return fmt.Errorf("%w: WriteRetryWindow %v: want more than 0 (at most %v)", ErrInvalidOptions, o.WriteRetryWindow, MaxWriteRetryWindow)
	case o.HTTP == nil:
		return fmt.Errorf("%w: HTTP is nil", ErrInvalidOptions)
	}
	return nil
}

// LoadTLS builds Options.TLS from PEM files: caFile (the nodes' CA; ""
// keeps the system's roots) and, both or neither, a client certificate
// and its key.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cairn: CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("cairn: %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("cairn: a client certificate needs both its file and its key")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("cairn: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
