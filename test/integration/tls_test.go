package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/launcher"
	"github.com/cairn-db/cairn/internal/security"
)

// tlsCluster starts n real `cairn serve` nodes with TLS on both ports
// through the launcher (which makes the CA and the node certificates
// under certs). With wait, it waits until every shard has a leader.
func tlsCluster(t *testing.T, n int, tc *launcher.TLS, wait bool) *launcher.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration tests start real processes; skipped with -short")
	}
	dir := t.TempDir()
	lc, err := launcher.New(launcher.Config{Bin: binary, Nodes: n, Dir: dir, Shards: 6,
		StopTimeout: exitTimeout, SysProcAttr: sysProcAttr, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lc.Close()
		if t.Failed() {
			for id := 1; id <= n; id++ {
				t.Logf("--- node %d log tail ---\n%s", id, tail(strings.TrimSpace(lc.Log(id)), 30))
			}
		}
	})
	for id := 1; id <= n; id++ {
		if err := lc.Start(id); err != nil {
			t.Fatal(err)
		}
	}
	if wait {
		if err := lc.WaitReady(context.Background(), readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	return lc
}

// trusting is an HTTP client that trusts the CA files given.
func trusting(t *testing.T, h2 bool, cas ...string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, ca := range cas {
		b, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Timeout: httpTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: h2}}
}

// A TLS cluster: a client without the CA fails, plain HTTP is refused
// with a JSON 400, a client with the CA writes and reads over HTTP/1.1
// and HTTP/2 (writes on followers are forwarded over mutual TLS).
func TestTLSClusterClients(t *testing.T) {
	certs := t.TempDir()
	tc := &launcher.TLS{Dir: certs}
	lc := tlsCluster(t, 3, tc, true)
	url := lc.URL(1)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("URL %s", url)
	}
	// Without the CA: the handshake fails on the client's side.
	_, err := (&http.Client{Timeout: httpTimeout}).Get(url + "/v1/kv/x")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a client without the CA: %v, want an unknown authority", err)
	}
	// Plain HTTP on the TLS port: a JSON 400 naming the problem.
	resp, err := (&http.Client{Timeout: httpTimeout}).Get("http://" + lc.Node(1).HTTPAddr + "/v1/kv/x")
	if err != nil {
		t.Fatalf("plain HTTP: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "tls_required") {
		t.Fatalf("plain HTTP: %d %s", resp.StatusCode, b)
	}
	// With the CA: puts through node 1 (forwarded to the leaders of the
	// shards it does not lead) and gets through every node.
	ca := tc.CAFile()
	for _, h2 := range []bool{false, true} {
		hc := trusting(t, h2, ca)
		for i := 0; i < 12; i++ {
			key := fmt.Sprintf("tls-%v-%d", h2, i)
			req, _ := http.NewRequest(http.MethodPut, url+"/v1/kv/"+key, strings.NewReader("v"+key))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 || (resp.ProtoMajor == 2) != h2 {
				t.Fatalf("put %s: %d over %s", key, resp.StatusCode, resp.Proto)
			}
			for id := 1; id <= 3; id++ {
				resp, err := hc.Get(lc.URL(id) + "/v1/kv/" + key)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(b) != "v"+key {
					t.Fatalf("get %s on node %d: %d %q", key, id, resp.StatusCode, b)
				}
			}
		}
	}
	// The Go client with Options.TLS.
	cfg, err := client.LoadTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(lc.Endpoints(), client.Options{TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, []byte("go-client"), []byte("ok"), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := cl.Get(ctx, []byte("go-client"), false); err != nil || string(v.Value) != "ok" {
		t.Fatalf("get: %+v %v", v, err)
	}
	if !strings.Contains(lc.Log(1), "authentication is off") {
		t.Error("a node without --auth does not say so in its log")
	}
	// The refusals above are counted.
	if n := metric(t, trusting(t, false, ca), url, "cairn_http_tls_handshake_failures_total"); n < 2 {
		t.Fatalf("node 1 counted %v failed handshakes, want at least 2", n)
	}
}

// A node whose peer certificate another CA signed takes no part in the
// raft traffic: the shards elect leaders among the two good nodes, a
// write through them never reaches its replicas, it leads nothing, and
// the good nodes count the refused connections.
func TestTLSForeignNodeCannotJoinRaft(t *testing.T) {
	certs, foreign := t.TempDir(), t.TempDir()
	tc := &launcher.TLS{Dir: certs, NodeDir: func(id int) string {
		if id == 3 {
			return foreign
		}
		return ""
	}}
	lc := tlsCluster(t, 3, tc, false)
	good := trusting(t, false, tc.CAFile())
	bad := trusting(t, false, filepath.Join(foreign, security.CACertFile))
	// Every shard gets a leader, node 1 or 2, as node 1 sees it.
	eventually(t, readyTimeout, func() string {
		ci, err := lc.Admin(1).Cluster(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, s := range ci.Shards {
			if s.Leader != 1 && s.Leader != 2 {
				return fmt.Sprintf("shard %d: leader %d", s.ID, s.Leader)
			}
		}
		return ""
	})
	req, _ := http.NewRequest(http.MethodPut, lc.URL(1)+"/v1/kv/secret", strings.NewReader("kept"))
	resp, err := good.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("put through node 1: %d", resp.StatusCode)
	}
	eventually(t, readyTimeout, func() string {
		refused := metric(t, good, lc.URL(1), "cairn_peer_tls_refused_total") + metric(t, good, lc.URL(2), "cairn_peer_tls_refused_total")
		dials := metric(t, bad, lc.URL(3), "cairn_peer_tls_dial_failures_total")
		if refused == 0 || dials == 0 {
			return fmt.Sprintf("refused %v by nodes 1 and 2, %v failed dials by node 3", refused, dials)
		}
		return ""
	})
	// Node 3 never sees the write, nor leads a shard.
	time.Sleep(2 * time.Second)
	resp, err = bad.Get(lc.URL(3) + "/v1/kv/secret?consistency=serializable")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || string(b) == "kept" {
		t.Fatalf("node 3 served the write: %d %q", resp.StatusCode, b)
	}
	if n := metric(t, bad, lc.URL(3), "cairn_leaders"); n != 0 {
		t.Fatalf("node 3 leads %v shards", n)
	}
	for id := 1; id <= 2; id++ {
		if strings.Contains(lc.Log(id), "level=ERROR") {
			t.Errorf("node %d logged an error", id)
		}
	}
}

// metric is the value of an unlabelled metric in node url's /metrics.
func metric(t *testing.T, hc *http.Client, url, name string) float64 {
	t.Helper()
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s: not in %s/metrics", name, url)
	return 0
}
