package backup

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// An https:// endpoint given without a CA (the nodes' certificates are
// signed by a root the system trusts) is backed up over TLS throughout:
// the shard streams too, not over plain HTTP/2 to the nodes' TLS ports
// (which fails, and sends the token in clear). The system's roots are
// read once per process, so the backup runs in a child process that
// trusts the test server's certificate through SSL_CERT_FILE.
func TestBackupOfAnHTTPSEndpointWithTheSystemRoots(t *testing.T) {
	if url := os.Getenv("CAIRN_TEST_HTTPS_NODE"); url != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := Backup(ctx, Config{Endpoint: url, Dir: filepath.Join(t.TempDir(), "b"), Access: Access{Token: "secret"}})
		if err != nil || m.Keys() != 1 {
			t.Fatalf("backup of %s with the system's roots: %v (%d keys)", url, err, m.Keys())
		}
		return
	}
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/cluster":
			_ = json.NewEncoder(w).Encode(client.ClusterInfo{NodeID: 1, Replication: 1,
				Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: strings.TrimPrefix(srv.URL, "https://"), Reachable: true}},
				Shards:  []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1}}})
		case "/v1/admin/backup/shards/1":
			bw, err := wire.NewBackupWriter(w, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 3})
			if err == nil {
				_ = bw.Add([]byte("a"), 1, nil, []byte("v"))
				_ = bw.Close()
			}
		default:
			http.NotFound(w, r)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBackupOfAnHTTPSEndpointWithTheSystemRoots$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAIRN_TEST_HTTPS_NODE="+srv.URL, "SSL_CERT_FILE="+ca, "SSL_CERT_DIR="+filepath.Dir(ca))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
