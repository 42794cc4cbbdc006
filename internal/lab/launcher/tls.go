package launcher

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-db/cairn/internal/security"
)

// TLS runs a cluster's nodes with TLS on both ports: HTTPS on the client
// port and mutual TLS between nodes, with the certificates of cairn
// cert's layout (ca.crt, node-<id>.crt, node-<id>.key).
type TLS struct {
	// Dir holds the CA and the node certificates. The launcher makes what
	// is missing at New: a CA, then node-<id> for the node's listen
	// addresses and localhost. Required.
	Dir string
	// ClientAuth is every node's --tls-client-auth (none,
	// verify-if-given or require; the CA of Dir verifies). Default none.
	ClientAuth string
	// NodeDir, when set, names the directory of node id's own
	// certificate and CA instead of Dir ("" keeps Dir): a test gives one
	// node a certificate of another CA. Default nil.
	NodeDir func(id int) string
}

// dir is node id's certificate directory.
func (t *TLS) dir(id int) string {
	if t.NodeDir != nil {
		if d := t.NodeDir(id); d != "" {
			return d
		}
	}
	return t.Dir
}

// CAFile is the CA every client of the cluster trusts.
func (t *TLS) CAFile() string { return filepath.Join(t.Dir, security.CACertFile) }

// launcherClient names the client certificate the launcher presents (for
// nodes that require one).
const launcherClient = "launcher"

// ClientConfig is a client configuration trusting the cluster's CA and
// presenting the launcher's client certificate (made at New).
func (t *TLS) ClientConfig() (*tls.Config, error) {
	p := security.ClientPaths(t.Dir, launcherClient)
	return security.ClientTLS(security.Files{CA: t.CAFile(), Cert: p.Cert, Key: p.Key})
}

// makeCerts creates the CA (in each directory used) and each node's
// certificate when missing.
func (t *TLS) makeCerts(nodes []*Node) error {
	if t.Dir == "" {
		return fmt.Errorf("%w: TLS.Dir is required", ErrInvalidConfig)
	}
	now := time.Now()
	if _, err := security.InitCA(t.Dir, now); err != nil && !errors.Is(err, security.ErrExists) {
		return fmt.Errorf("launcher: %w", err)
	}
	if p := security.ClientPaths(t.Dir, launcherClient); !exists(p.Key) {
		if _, err := security.IssueClient(t.Dir, launcherClient, now); err != nil {
			return fmt.Errorf("launcher: %w", err)
		}
	}
	for _, n := range nodes {
		dir := t.dir(n.ID)
		if _, err := security.InitCA(dir, now); err != nil && !errors.Is(err, security.ErrExists) {
			return fmt.Errorf("launcher: %w", err)
		}
		p := security.NodePaths(dir, uint64(n.ID))
		if exists(p.Key) {
			continue
		}
		hosts := []string{"localhost"}
		for _, a := range []string{n.HTTPAddr, n.PeerAddr} {
			if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
				hosts = append(hosts, h)
			}
		}
		if _, err := security.IssueNode(dir, uint64(n.ID), hosts, now); err != nil {
			return fmt.Errorf("launcher: %w", err)
		}
	}
	return nil
}

// args are node id's TLS flags.
func (t *TLS) args(id int) []string {
	dir := t.dir(id)
	p := security.NodePaths(dir, uint64(id))
	ca := filepath.Join(dir, security.CACertFile)
	out := []string{"--tls-cert", p.Cert, "--tls-key", p.Key, "--tls-ca", ca,
		"--peer-tls-cert", p.Cert, "--peer-tls-key", p.Key, "--peer-tls-ca", ca}
	if t.ClientAuth != "" {
		out = append(out, "--tls-client-auth", t.ClientAuth)
	}
	return out
}

// httpClient is the launcher's own client of the nodes (readiness,
// admin): plain, or trusting the cluster's CA.
func httpClient(t *TLS) (*http.Client, error) {
	if t == nil {
		return &http.Client{Timeout: 5 * time.Second}, nil
	}
	cfg, err := t.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 8}}, nil
}

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}
