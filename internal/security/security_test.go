package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := InitCA(dir, now); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestChainVerifiesAndExpiryIsSet(t *testing.T) {
	dir := newCA(t)
	np, err := IssueNode(dir, 3, []string{"127.0.0.1", "localhost", "n3.example"}, now)
	if err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, dir+"/"+CACertFile)
	node := readCert(t, np.Cert)
	pool, err := LoadPool(dir + "/" + CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "n3.example"} {
		if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("node cert for %s: %v", host, err)
		}
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example", CurrentTime: now}); err == nil {
		t.Error("node cert verified for a host it does not name")
	}
	if !ca.IsCA || ca.NotAfter.Sub(now) != CAValidity {
		t.Errorf("CA: IsCA %v, valid for %v, want %v", ca.IsCA, ca.NotAfter.Sub(now), CAValidity)
	}
	if node.IsCA || node.NotAfter.Sub(now) != NodeValidity || !node.NotBefore.Before(now) {
		t.Errorf("node: IsCA %v, valid from %v for %v, want %v", node.IsCA, node.NotBefore, node.NotAfter.Sub(now), NodeValidity)
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now.Add(NodeValidity + time.Hour)}); err == nil {
		t.Error("node cert verified after its expiry")
	}
	if !IsNodeCert(node) {
		t.Error("node cert is not a node cert")
	}
	cp, err := IssueClient(dir, "alice", now)
	if err != nil {
		t.Fatal(err)
	}
	cl := readCert(t, cp.Cert)
	if IsNodeCert(cl) || cl.Subject.CommonName != "alice" {
		t.Errorf("client cert: node %v, CN %q", IsNodeCert(cl), cl.Subject.CommonName)
	}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert: %v", err)
	}
	for _, key := range []string{dir + "/" + CAKeyFile, np.Key, cp.Key} {
		fi, err := os.Stat(key)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", key, fi.Mode().Perm())
		}
	}
}

func TestWrongCAFails(t *testing.T) {
	dir, other := newCA(t), newCA(t)
	np, err := IssueNode(other, 1, []string{"127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadPool(dir + "/" + CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readCert(t, np.Cert).Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now}); err == nil {
		t.Fatal("a certificate of another CA verified")
	}
}

func TestInitCARefusesOverwriteAndIssueNeedsCA(t *testing.T) {
	dir := newCA(t)
	before, _ := os.ReadFile(dir + "/" + CAKeyFile)
	if _, err := InitCA(dir, now); !errors.Is(err, ErrExists) {
		t.Fatalf("second InitCA: %v, want ErrExists", err)
	}
	after, _ := os.ReadFile(dir + "/" + CAKeyFile)
	if string(before) != string(after) {
		t.Fatal("the CA key changed")
	}
	if _, err := IssueNode(t.TempDir(), 1, []string{"localhost"}, now); !errors.Is(err, ErrNoCA) {
		t.Fatalf("IssueNode without a CA: %v, want ErrNoCA", err)
	}
	if _, err := IssueClient(dir, "../x", now); err == nil {
		t.Fatal("a client name with a path was accepted")
	}
	if _, err := IssueNode(dir, 1, nil, now); err == nil {
		t.Fatal("a node certificate without hosts was issued")
	}
}

func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]ClientAuth{"": ClientAuthNone, "none": ClientAuthNone,
		"require": ClientAuthRequire, "verify-if-given": ClientAuthVerifyIfGiven} {
		if got, err := ParseClientAuth(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := ParseClientAuth("always"); err == nil {
		t.Error("bad value accepted")
	}
}

// handshake runs a TLS handshake between the two configurations over a
// loopback connection and returns the client's and the server's errors.
func handshake(t *testing.T, server, client *tls.Config) (cerr, serr error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	client = client.Clone()
	client.ServerName = "127.0.0.1"
	done := make(chan error, 1)
	go func() {
		s := tls.Server(b, server)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3 clients finish before the server has checked their
			// certificate: read to learn its verdict.
			_, err = s.Read(make([]byte, 1))
		}
		b.Close()
		done <- err
	}()
	c := tls.Client(a, client)
	cerr = c.Handshake()
	if cerr == nil {
		_, cerr = c.Write([]byte{1})
		if cerr == nil {
			_, cerr = c.Read(make([]byte, 1))
		}
	}
	a.Close()
	serr = <-done
	return cerr, serr
}

func TestPeerTLS(t *testing.T) {
	dir, other := newCA(t), newCA(t)
	n1, _ := IssueNode(dir, 1, []string{"127.0.0.1"}, time.Now())
	n2, _ := IssueNode(dir, 2, []string{"127.0.0.1"}, time.Now())
	foreign, _ := IssueNode(other, 3, []string{"127.0.0.1"}, time.Now())
	user, _ := IssueClient(dir, "user", time.Now())
	ca := dir + "/" + CACertFile
	peer := func(p Paths, ca string) (*tls.Config, *tls.Config) {
		s, c, err := PeerTLS(Files{Cert: p.Cert, Key: p.Key, CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	s1, _ := peer(n1, ca)
	_, c2 := peer(n2, ca)
	if _, serr := handshake(t, s1, c2); serr != nil {
		t.Fatalf("two nodes of one CA: server %v", serr)
	}
	// A node with a certificate of another CA (trusting that CA) is
	// refused by the server, and refuses the server.
	_, cf := peer(foreign, other+"/"+CACertFile)
	cerr, serr := handshake(t, s1, cf)
	if cerr == nil || serr == nil {
		t.Fatalf("foreign node: client %v, server %v; want both refused", cerr, serr)
	}
	// Even trusting the cluster CA, its own certificate is refused.
	_, cf2 := peer(foreign, ca)
	if _, serr := handshake(t, s1, cf2); serr == nil {
		t.Fatal("server accepted a certificate of another CA")
	}
	// A user's client certificate of the cluster CA is no node's.
	uc, err := ClientTLS(Files{CA: ca, Cert: user.Cert, Key: user.Key})
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := handshake(t, s1, uc); !errors.Is(serr, ErrNotNode) {
		t.Fatalf("client certificate on the peer port: server %v, want ErrNotNode", serr)
	}
}

func TestServerTLSClientAuth(t *testing.T) {
	dir := newCA(t)
	n1, _ := IssueNode(dir, 1, []string{"127.0.0.1"}, time.Now())
	user, _ := IssueClient(dir, "user", time.Now())
	ca := dir + "/" + CACertFile
	f := Files{Cert: n1.Cert, Key: n1.Key, CA: ca}
	if _, err := ServerTLS(f, ClientAuthRequire, "h2"); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLS(Files{Cert: n1.Cert, Key: n1.Key}, ClientAuthRequire); err == nil {
		t.Fatal("require without a CA accepted")
	}
	req, _ := ServerTLS(f, ClientAuthRequire)
	anon, _ := ClientTLS(Files{CA: ca})
	if _, serr := handshake(t, req, anon); serr == nil {
		t.Fatal("require: a client without a certificate got through")
	}
	withCert, _ := ClientTLS(Files{CA: ca, Cert: user.Cert, Key: user.Key})
	if _, serr := handshake(t, req, withCert); serr != nil {
		t.Fatalf("require: a client with a certificate: %v", serr)
	}
	none, _ := ServerTLS(f, ClientAuthNone)
	if _, serr := handshake(t, none, anon); serr != nil {
		t.Fatalf("none: %v", serr)
	}
	noCA, _ := ClientTLS(Files{})
	if cerr, _ := handshake(t, none, noCA); cerr == nil {
		t.Fatal("a client without the CA trusted the node")
	}
}
