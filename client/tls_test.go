package client

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// Options.TLS reaches the default HTTP client: with the server's CA an
// https:// endpoint answers, without it the handshake fails.
func TestOptionsTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	with := Options{TLS: cfg}.EnsureDefaults()
	resp, err := with.HTTP.Get(srv.URL)
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	resp.Body.Close()
	without := Options{}.EnsureDefaults()
	if resp, err := without.HTTP.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("without the CA the server was trusted")
	}
	if _, err := LoadTLS(filepath.Join(t.TempDir(), "none"), "", ""); err == nil {
		t.Fatal("a missing CA file loaded")
	}
	if _, err := LoadTLS(ca, ca, ""); err == nil {
		t.Fatal("a certificate without a key loaded")
	}
}
