package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Validity of the certificates this package creates.
const (
	// CAValidity: a cluster CA lives 10 years.
	CAValidity = 10 * 365 * 24 * time.Hour
	// NodeValidity: node and client certificates live 1 year; issue new
	// ones (with the same CA) and restart the node before they expire.
	NodeValidity = 365 * 24 * time.Hour
	// backdate: certificates are valid from a little before they were
	// made, so a peer whose clock runs behind accepts them.
	backdate = time.Hour
)

// File names under a certificate directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Errors.
var (
	// ErrExists: InitCA found a CA in the directory already.
	ErrExists = errors.New("security: a CA exists in the directory")
	// ErrNoCA: the directory holds no CA (run InitCA first).
	ErrNoCA = errors.New("security: no CA in the directory (run cairn cert init)")
)

// Paths of one issued certificate and its key.
type Paths struct{ Cert, Key string }

// NodePaths are the files IssueNode writes for node id under dir.
func NodePaths(dir string, id uint64) Paths {
	base := filepath.Join(dir, "node-"+strconv.FormatUint(id, 10))
	return Paths{Cert: base + ".crt", Key: base + ".key"}
}

// ClientPaths are the files IssueClient writes for name under dir.
func ClientPaths(dir, name string) Paths {
	base := filepath.Join(dir, "client-"+name)
	return Paths{Cert: base + ".crt", Key: base + ".key"}
}

// InitCA creates a CA key and certificate in dir (made if missing). It
// refuses (ErrExists) to overwrite one: certificates signed by it would no
// longer verify.
func InitCA(dir string, now time.Time) (Paths, error) {
	p := Paths{Cert: filepath.Join(dir, CACertFile), Key: filepath.Join(dir, CAKeyFile)}
	if _, err := os.Stat(p.Key); err == nil {
		return p, fmt.Errorf("%w: %s", ErrExists, p.Key)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, fmt.Errorf("security: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, fmt.Errorf("security: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Cairn"}, CommonName: "Cairn cluster CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return p, fmt.Errorf("security: CA certificate: %w", err)
	}
	return p, write(p, der, key)
}

// IssueNode signs, with the CA in dir, a certificate for node id that
// serves and dials (server and client usage) under every name of hosts
// (IP addresses or DNS names), and writes it to NodePaths(dir, id).
func IssueNode(dir string, id uint64, hosts []string, now time.Time) (Paths, error) {
	if id == 0 {
		return Paths{}, errors.New("security: node id must be positive")
	}
	if len(hosts) == 0 {
		return Paths{}, errors.New("security: a node certificate needs at least one host name or address")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Cairn"}, OrganizationalUnit: []string{"node"}, CommonName: "node-" + strconv.FormatUint(id, 10)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(dir, NodePaths(dir, id), tmpl, now)
}

var clientName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// IssueClient signs, with the CA in dir, a client certificate (client
// usage only) named name and writes it to ClientPaths(dir, name).
func IssueClient(dir, name string, now time.Time) (Paths, error) {
	if !clientName.MatchString(name) {
		return Paths{}, fmt.Errorf("security: client name %q: want 1-64 letters, digits, '.', '_' or '-'", name)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"Cairn"}, OrganizationalUnit: []string{"client"}, CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return issue(dir, ClientPaths(dir, name), tmpl, now)
}

// issue fills tmpl's serial, validity and key usage, signs it with dir's
// CA and writes the certificate and a new key to p.
func issue(dir string, p Paths, tmpl *x509.Certificate, now time.Time) (Paths, error) {
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return p, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, fmt.Errorf("security: key: %w", err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(NodeValidity)
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return p, fmt.Errorf("security: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return p, write(p, der, key)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: %s", ErrNoCA, dir)
	} else if err != nil {
		return nil, nil, fmt.Errorf("security: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("security: CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("security: %s: CA files are not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("security: CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("security: CA key: %w", err)
	}
	return cert, key, nil
}

// write stores a certificate (0644) and its key (0600), the key first:
// a certificate without its key is never left behind.
func write(p Paths, der []byte, key *ecdsa.PrivateKey) error {
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if err := writeFile(p.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return err
	}
	return writeFile(p.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile writes b to a temporary file and renames it over path, so a
// reader never sees half a file; mode is set before any byte is written.
func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if err := f.Chmod(mode); err == nil {
		_, err = f.Write(b)
	}
	if err2 := f.Sync(); err == nil {
		err = err2
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("security: write %s: %w", path, err)
	}
	return nil
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("security: no randomness: " + err.Error())
	}
	return n.Add(n, big.NewInt(1))
}
