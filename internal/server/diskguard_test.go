package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

func TestDiskGuardReasons(t *testing.T) {
	free, used := uint64(1<<30), uint64(100)
	g := newDiskGuard("dir", 1<<20, 1000, func() uint64 { return used }, slog.Default())
	g.statfs = func(string) (uint64, error) { return free, nil }
	if st := g.check(); st.Refusing != "" || st.FreeBytes != 1<<30 || st.UsedBytes != 100 {
		t.Fatalf("room and under quota: %+v", st)
	}
	used = 2000
	if st := g.check(); st.Refusing != kv.QuotaExceeded {
		t.Fatalf("over quota: %+v", st)
	}
	free = 1 << 10 // below the reserve: disk full wins over the quota
	if st := g.check(); st.Refusing != kv.DiskFull {
		t.Fatalf("below reserve: %+v", st)
	}
	free, used = 1<<30, 10
	if st := g.Inject(true); st.Refusing != kv.DiskFull || !st.Injected {
		t.Fatalf("injected: %+v", st)
	}
	if st := g.Inject(false); st.Refusing != "" {
		t.Fatalf("healed: %+v", st)
	}
	// A failing statfs keeps the last free space rather than inventing one.
	g.statfs = func(string) (uint64, error) { return 0, errors.New("gone") }
	if st := g.check(); st.Refusing != "" || st.FreeBytes != 1<<30 {
		t.Fatalf("statfs error: %+v", st)
	}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A node whose disk is full (injected) answers new values with 507
// disk_full, still serves reads and deletes, says so in /v1/status and
// /metrics, and takes values again once the fault heals.
func TestDiskFullNodeRefusesPutsOnly(t *testing.T) {
	s := oneNode(t)
	base := "http://" + s.HTTPAddr()
	put(t, s, 1)
	put(t, s, 2)
	faults{s}.DiskFull(true)
	code, body := httpDo(t, "PUT", base+"/v1/kv/k3", "v")
	var e struct{ Error, Message string }
	if code != http.StatusInsufficientStorage || json.Unmarshal([]byte(body), &e) != nil || e.Error != kv.DiskFull || e.Message == "" {
		t.Fatalf("put on a full disk: %d %s", code, body)
	}
	if code, body := httpDo(t, "GET", base+"/v1/kv/k1", ""); code != 200 || body != "v" {
		t.Fatalf("read on a full disk: %d %s", code, body)
	}
	if code, body := httpDo(t, "DELETE", base+"/v1/kv/k2", ""); code >= 300 {
		t.Fatalf("delete on a full disk: %d %s", code, body)
	}
	var st kv.NodeStatus
	if _, body := httpDo(t, "GET", base+"/v1/status", ""); json.Unmarshal([]byte(body), &st) != nil || st.Disk == nil || st.Disk.Refusing != kv.DiskFull || !st.Disk.Injected {
		t.Fatalf("status on a full disk: %s", body)
	}
	if _, body := httpDo(t, "GET", base+"/metrics", ""); !strings.Contains(body, `cairn_disk_refusing_writes{reason="disk_full"} 1`) {
		t.Fatal("metrics do not say the disk is full")
	}
	if _, body := httpDo(t, "GET", base+"/metrics", ""); !strings.Contains(body, "cairn_peer_send_queue_drops_total ") || !strings.Contains(body, "cairn_peer_wrong_sender_total ") {
		t.Fatal("metrics lack the peer queue drops or the wrong-sender count")
	}
	faults{s}.DiskFull(false)
	if code, body := httpDo(t, "PUT", base+"/v1/kv/k3", "v"); code >= 300 {
		t.Fatalf("put after healing: %d %s", code, body)
	}
}

// Past --quota-bytes the node answers new values with 507 quota_exceeded.
func TestQuotaExceeded(t *testing.T) {
	s, err := New(Config{NodeID: 1, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
		InitialCluster: map[uint64]string{1: "127.0.0.1:0"}, Replication: 1, Shards: 1, QuotaBytes: 1,
		TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := s.coord.Put(ctx, []byte("k"), []byte("v"), kv.WriteOptions{}); !errors.Is(err, kv.ErrQuotaExceeded) {
		t.Fatalf("put past a 1-byte quota: %v", err)
	}
	if code, body := httpDo(t, "PUT", "http://"+s.HTTPAddr()+"/v1/kv/k", "v"); code != 507 || !strings.Contains(body, kv.QuotaExceeded) {
		t.Fatalf("HTTP put past the quota: %d %s", code, body)
	}
}
