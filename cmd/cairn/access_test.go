package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"
)

// An operator who gives --ca (or --cert/--key) asks for TLS: an
// endpoint of plain http:// (the default one, or host:port without a
// scheme) is refused before anything is sent, instead of sending the
// admin token in clear; so is a redirect from https:// to http://.
func TestAdminTLSFlagsRefusePlainEndpoint(t *testing.T) {
	var sawToken atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawToken.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"members":[]}`))
	}))
	defer plain.Close()
	// A TLS endpoint that redirects to the plain one.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "cairn_secretsecretsecretsecretsecretsecretsecr"
	for _, endpoint := range []string{plain.URL, strings.TrimPrefix(plain.URL, "http://"), tlsSrv.URL} {
		for _, args := range [][]string{
			{"node", "list", "--json"},
			{"token", "create", "--role", "read"},
			{"token", "revoke", strings.Repeat("ab", 32)},
		} {
			cmd := newAdminCmd()
			cmd.SetOut(&strings.Builder{})
			cmd.SetErr(&strings.Builder{})
			cmd.SetArgs(append([]string{"--endpoint", endpoint, "--ca", ca, "--token", secret}, args...))
			if err := cmd.Execute(); err == nil {
				t.Errorf("%s %v with --ca over plain HTTP: no error", endpoint, args)
			}
			if n := sawToken.Swap(0); n != 0 {
				t.Errorf("%s %v with --ca: the token went over plain HTTP (%d requests)", endpoint, args, n)
			}
		}
	}
}

// backup, restore and kv take the same flags and refuse a plain
// endpoint with --ca alike, before anything is sent.
func TestBackupTLSFlagsRefusePlainEndpoint(t *testing.T) {
	var asked atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer plain.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("not read: refused first"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  func() *cobra.Command
		args []string
	}{
		{newBackupCmd, []string{"--endpoint", plain.URL, "--to", t.TempDir() + "/b"}},
		{newRestoreCmd, []string{"--endpoints", "https://127.0.0.1:1," + plain.URL, "--from", t.TempDir()}},
		{newKVCmd, []string{"get", "k", "--endpoints", plain.URL}},
	} {
		cmd := tc.cmd()
		cmd.SetOut(&strings.Builder{})
		cmd.SetErr(&strings.Builder{})
		cmd.SetArgs(append(tc.args, "--ca", ca, "--token", "cairn_x"))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "https://") {
			t.Errorf("%s with --ca and a plain endpoint: %v, want a refusal naming https://", cmd.Name(), err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("%d requests reached the plain endpoint", n)
	}
}

// cairn kv sends $CAIRN_TOKEN when --token is not given, as its help
// says.
func TestKVTakesTheTokenFromTheEnvironment(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("ETag", `"1"`)
		_, _ = w.Write([]byte("v"))
	}))
	defer srv.Close()
	t.Setenv("CAIRN_TOKEN", "cairn_fromenv")
	cmd := newKVCmd()
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SetArgs([]string{"get", "k", "--endpoints", srv.URL})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if h, _ := got.Load().(string); h != "Bearer cairn_fromenv" {
		t.Fatalf("Authorization %q, want the token of $CAIRN_TOKEN", h)
	}
}
