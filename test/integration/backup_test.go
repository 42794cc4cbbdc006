package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/backup"
	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// TestBackupUnderLoadRestoreElsewhere takes `cairn backup` of a
// three-node cluster while clients keep writing, then `cairn restore`s it
// into a fresh five-node cluster: every write acknowledged before the
// backup started is there with its value. A damaged backup is refused.
func TestBackupUnderLoadRestoreElsewhere(t *testing.T) {
	src := newCluster(t, 3)
	cl, err := client.New(src.lc.Endpoints(), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type write struct {
		key, value string
		acked      time.Time
	}
	var (
		mu        sync.Mutex
		acked     []write
		wg        sync.WaitGroup
		ctx, stop = context.WithCancel(context.Background())
	)
	defer stop()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				k, v := fmt.Sprintf("bk/%d/%d", w, i), fmt.Sprintf("value-%d-%d", w, i)
				idx := client.IndexTerms{"writer_bin": {fmt.Sprint("w", w)}, "seq_int": {fmt.Sprint(i)}}
				if _, err := cl.PutIndexed(ctx, []byte(k), []byte(v), client.PutOptions{}, idx); err != nil {
					continue
				}
				mu.Lock()
				acked = append(acked, write{k, v, time.Now()})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second) // some data before the backup

	dir := filepath.Join(t.TempDir(), "backup")
	start := time.Now()
	out, err := exec.Command(binary, "backup", "--endpoint", src.url(1), "--to", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("cairn backup: %v\n%s", err, out)
	}
	t.Logf("cairn backup under load: %s", strings.TrimSpace(lastLine(string(out))))
	time.Sleep(500 * time.Millisecond) // writes go on after the backup
	stop()
	wg.Wait()

	var before []write
	for _, w := range acked {
		if w.acked.Before(start) {
			before = append(before, w)
		}
	}
	if len(before) < 100 || len(acked) == len(before) {
		t.Fatalf("%d writes acknowledged before the backup, %d in all: the load did not run across it", len(before), len(acked))
	}
	m, err := backup.Verify(dir)
	if err != nil || len(m.Shards) != 16 {
		t.Fatalf("verify: %v, %d shards", err, len(m.Shards))
	}

	dst := newCluster(t, 5)
	out, err = exec.Command(binary, "restore", "--from", dir, "--endpoints", strings.Join(dst.lc.Endpoints(), ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("cairn restore: %v\n%s", err, out)
	}
	t.Logf("cairn restore into 5 nodes: %s", strings.TrimSpace(lastLine(string(out))))
	dcl, err := client.New(dst.lc.Endpoints(), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for i, w := range before {
		v, err := dcl.Get(context.Background(), []byte(w.key), false)
		if err != nil || string(v.Value) != w.value {
			if missing++; missing <= 5 {
				t.Errorf("%s after restore: %q %v, want %q", w.key, v.Value, err, w.value)
			}
		}
		if i%50 != 0 {
			continue
		}
		// The object's index terms came back with it.
		_, _, idx, err := dcl.Head(context.Background(), []byte(w.key), false)
		var wn, seq int
		fmt.Sscanf(w.key, "bk/%d/%d", &wn, &seq)
		if err != nil || fmt.Sprint(idx["writer_bin"]) != fmt.Sprintf("[w%d]", wn) || fmt.Sprint(idx["seq_int"]) != fmt.Sprintf("[%d]", seq) {
			t.Errorf("%s after restore: index terms %v (%v), want writer_bin=w%d seq_int=%d", w.key, idx, err, wn, seq)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d writes acknowledged before the backup are missing after the restore", missing, len(before))
	}
	t.Logf("%d writes acknowledged before the backup, all restored (%d in the backup, %d acknowledged in all)", len(before), m.Keys(), len(acked))

	// A damaged file is refused, and restore writes nothing from it.
	f := filepath.Join(dir, m.Shards[0].File)
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(dir); !errors.Is(err, backup.ErrBadBackup) {
		t.Fatalf("verify of a damaged backup: %v, want ErrBadBackup", err)
	}
	if out, err := exec.Command(binary, "restore", "--from", dir, "--endpoints", dst.url(1)).CombinedOutput(); err == nil {
		t.Fatalf("restore of a damaged backup succeeded:\n%s", out)
	}
}

// testBackupRoute checks the backup route's refusals on a healthy cluster.
func testBackupRoute(t *testing.T, c *cluster) {
	for path, want := range map[string]int{
		"/v1/admin/backup/shards/1":   426, // HTTP/1.1: the stream is HTTP/2 only
		"/v1/admin/backup/shards/x":   400,
		"/v1/admin/backup/shards/0":   400,
		"/v1/admin/backup/shards/999": 426,
	} {
		if code, body, _ := c.get(1, path); code != want || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s: %d %.200s, want %d with a JSON error", path, code, body, want)
		}
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// TestBackupOfASecureCluster backs up a cluster with TLS on both ports and
// --auth (an admin token, the CA), refuses without the token, and restores
// into a plain cluster.
func TestBackupOfASecureCluster(t *testing.T) {
	tc := &launcher.TLS{Dir: filepath.Join(t.TempDir(), "certs")}
	lc, err := launcher.New(launcher.Config{Bin: binary, Nodes: 3, Dir: t.TempDir(), Shards: 6,
		StopTimeout: exitTimeout, SysProcAttr: sysProcAttr, TLS: tc, Extra: []string{"--auth"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	if err := lc.StartAll(); err != nil {
		t.Fatal(err)
	}
	var admin string
	eventually(t, readyTimeout, func() string {
		b, err := os.ReadFile(filepath.Join(lc.Node(1).Dir, "admin-token"))
		if err != nil {
			return err.Error()
		}
		admin = strings.TrimSpace(string(b))
		return ""
	})
	hc := trusting(t, false, tc.CAFile())
	for i := range 50 {
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/v1/kv/sec-%d", lc.URL(1+i%3), i), strings.NewReader(fmt.Sprint("v", i)))
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("PUT sec-%d: %s", i, resp.Status)
		}
	}
	dir := filepath.Join(t.TempDir(), "backup")
	out, err := exec.Command(binary, "backup", "--endpoint", lc.URL(2), "--ca", tc.CAFile(), "--to", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Fatalf("backup without a token: %v\n%s; want a 401 refusal", err, out)
	}
	_ = os.RemoveAll(dir)
	out, err = exec.Command(binary, "backup", "--endpoint", lc.URL(2), "--ca", tc.CAFile(), "--token", admin, "--to", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("backup with the CA and an admin token: %v\n%s", err, out)
	}
	dst := newCluster(t, 3)
	if out, err := exec.Command(binary, "restore", "--from", dir, "--endpoints", dst.url(1)).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	for i := range 50 {
		if r := dst.do("GET", dst.v1URL(1+i%3, fmt.Sprint("sec-", i), ""), nil); r.code != 200 || r.body != fmt.Sprint("v", i) {
			t.Fatalf("sec-%d after restore: %v", i, r)
		}
	}
}
