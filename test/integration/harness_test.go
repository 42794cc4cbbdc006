package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/launcher"
	"github.com/cairn-db/cairn/internal/shard"
)

// binary is the cairn executable TestMain built for this run.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test that needs the binary skips itself
	}
	dir, err := os.MkdirTemp("", "cairn-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "cairn")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", binary, "./cmd/cairn")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cairn:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot is the first directory at or above the working directory
// holding a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Bounds of the harness's own waits.
const (
	readyTimeout = 30 * time.Second // a started cluster elects every leader
	exitTimeout  = 20 * time.Second // a signalled node exits
	httpTimeout  = 10 * time.Second // any one HTTP exchange
)

// cluster is a set of real nodes started by one test through the
// launcher. Every process is killed in t.Cleanup; on failure each node's
// log tail is printed.
type cluster struct {
	t  *testing.T
	lc *launcher.Cluster
	hc *http.Client

	mu       sync.Mutex
	unexpect []string // runs that exited on their own
}

// newCluster starts n nodes (ids 1..n, replication min(3, n), 16 shards)
// with the extra serve flags and waits until every shard has a leader.
func newCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration tests start real processes; skipped with -short")
	}
	c := &cluster{t: t, hc: &http.Client{
		Timeout: httpTimeout,
		// A redirect is an answer to check, never something to follow: a
		// followed PUT could silently write another key.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	// TempDir first: cleanups run last-in first-out, so the nodes are
	// killed and their logs printed before their directory is removed.
	dir := t.TempDir()
	t.Cleanup(c.cleanup)
	lc, err := launcher.Launch(context.Background(), launcher.Config{
		Bin: binary, Nodes: n, Dir: dir, Shards: 16, Extra: extra,
		StopTimeout: exitTimeout, SysProcAttr: sysProcAttr,
		OnExit: func(id int, err error) {
			c.mu.Lock()
			c.unexpect = append(c.unexpect, fmt.Sprintf("node %d exited on its own: %v", id, err))
			c.mu.Unlock()
		},
	}, readyTimeout)
	if err != nil {
		t.Fatalf("starting a %d-node cluster: %v", n, err)
	}
	c.lc = lc
	return c
}

// url of node i's HTTP API.
func (c *cluster) url(i int) string { return c.lc.URL(i) }

// running reports whether node i's process is alive.
func (c *cluster) running(i int) bool { return c.lc.Running(i) }

// start (re)starts node i on its data dir; it does not wait for readiness.
func (c *cluster) start(i int) {
	c.t.Helper()
	if err := c.lc.Start(i); err != nil {
		c.t.Fatalf("starting node %d: %v", i, err)
	}
}

// stop sends SIGTERM to node i and waits for a clean exit (status 0). A
// node that does not stop within exitTimeout is killed and the test fails.
func (c *cluster) stop(i int) {
	c.t.Helper()
	if err := c.lc.Stop(i); err != nil {
		c.t.Errorf("SIGTERM of node %d: %v", i, err)
	}
}

// kill sends SIGKILL to node i and waits for it to exit.
func (c *cluster) kill(i int) { c.lc.Kill(i) }

func (c *cluster) cleanup() {
	if c.lc == nil {
		return
	}
	c.lc.Close()
	c.mu.Lock()
	for _, u := range c.unexpect {
		c.t.Errorf("%s", u)
	}
	c.mu.Unlock()
	if !c.t.Failed() {
		return
	}
	for id := 1; id <= c.lc.Size(); id++ {
		log := c.lc.Log(id)
		var notable []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "level=ERROR") || strings.Contains(l, "panic") || strings.Contains(l, "fatal") {
				notable = append(notable, l)
			}
		}
		if len(notable) == 0 {
			notable = []string{"(none)"}
		}
		if len(notable) > 20 {
			notable = append(notable[:10], append([]string{"…"}, notable[len(notable)-10:]...)...)
		}
		c.t.Logf("--- node %d (%s): %d log lines; errors/panics:\n%s\n--- node %d log tail ---\n%s",
			id, c.lc.Node(id).HTTPAddr, strings.Count(log, "\n"), strings.Join(notable, "\n"), id, tail(strings.TrimSpace(log), 50))
	}
}

// waitReady waits until every running node answers GET /v1/status and
// sees a running leader for every shard in GET /v1/cluster.
func (c *cluster) waitReady(timeout time.Duration) {
	c.t.Helper()
	if err := c.lc.WaitReady(context.Background(), timeout); err != nil {
		c.t.Fatal(err)
	}
}

// clusterInfo is node i's GET /v1/cluster.
func (c *cluster) clusterInfo(i int) (client.ClusterInfo, error) {
	return c.lc.Admin(i).Cluster(context.Background())
}

// leaderCounts returns how many shards each node leads (0: no leader
// known), as the first running node sees it.
func (c *cluster) leaderCounts() map[int]int {
	c.t.Helper()
	for i := 1; i <= c.lc.Size(); i++ {
		if !c.running(i) {
			continue
		}
		ci, err := c.clusterInfo(i)
		if err != nil {
			c.t.Fatal(err)
		}
		out := map[int]int{}
		for _, s := range ci.Shards {
			out[int(s.Leader)]++
		}
		return out
	}
	c.t.Fatal("leaderCounts: no node is running")
	return nil
}

// shardOf maps each key to the id of the shard owning it, from node i's
// shard map and the server's token function.
func (c *cluster) shardOf(i int, keys []string) map[string]uint64 {
	c.t.Helper()
	ci, err := c.clusterInfo(i)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, k := range keys {
		t := shard.Token([]byte(k))
		for _, s := range ci.Shards {
			if s.Owns(t) {
				out[k] = s.ID
				break
			}
		}
		if out[k] == 0 {
			c.t.Fatalf("no shard of node %d's map owns key %q (token %016x)", i, k, t)
		}
	}
	return out
}

// keysPerShard returns perShard keys "prefix-N" for every shard.
func (c *cluster) keysPerShard(prefix string, perShard int) []string {
	c.t.Helper()
	ci, err := c.clusterInfo(1)
	if err != nil {
		c.t.Fatal(err)
	}
	count := map[uint64]int{}
	var keys []string
	for n := 0; len(keys) < perShard*len(ci.Shards) && n < 100000; n++ {
		k := fmt.Sprintf("%s-%d", prefix, n)
		t := shard.Token([]byte(k))
		for _, s := range ci.Shards {
			if s.Owns(t) && count[s.ID] < perShard {
				count[s.ID]++
				keys = append(keys, k)
			}
		}
	}
	if len(keys) != perShard*len(ci.Shards) {
		c.t.Fatalf("could not find %d keys for each of %d shards", perShard, len(ci.Shards))
	}
	return keys
}

// result is one HTTP answer; code 0 means no answer (err set).
type result struct {
	code int
	body string
	h    http.Header
	err  error
	took time.Duration
}

func (r result) String() string {
	if r.code == 0 {
		return fmt.Sprintf("no answer after %v: %v", r.took.Round(time.Millisecond), r.err)
	}
	return fmt.Sprintf("%d %.300q", r.code, r.body)
}

// do sends one request (hdr is name, value, name, value…). It is safe to
// call from any goroutine.
func (c *cluster) do(method, u string, body []byte, hdr ...string) result {
	return c.doCtx(context.Background(), method, u, body, hdr...)
}

func (c *cluster) doCtx(ctx context.Context, method, u string, body []byte, hdr ...string) result {
	start := time.Now()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return result{err: err}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return result{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{code: resp.StatusCode, body: string(b), h: resp.Header, err: err, took: time.Since(start)}
}

func (c *cluster) get(i int, path string) (int, string, error) {
	r := c.do("GET", c.url(i)+path, nil)
	return r.code, r.body, r.err
}

// v0 entity helpers; id is query-escaped, replicas "" means the default.
func (c *cluster) v0URL(i int, id, replicas string) string {
	u := c.url(i) + "/v0/entity?id=" + url.QueryEscape(id)
	if replicas != "" {
		u += "&replicas=" + url.QueryEscape(replicas)
	}
	return u
}

func (c *cluster) put0(i int, id, value, replicas string) result {
	return c.do("PUT", c.v0URL(i, id, replicas), []byte(value))
}

func (c *cluster) get0(i int, id, replicas string) result {
	return c.do("GET", c.v0URL(i, id, replicas), nil)
}

func (c *cluster) del0(i int, id, replicas string) result {
	return c.do("DELETE", c.v0URL(i, id, replicas), nil)
}

// v1URL escapes every byte of key outside [A-Za-z0-9_~-] as %XX, the
// contract's "any byte can be sent as %XX"; query is appended as is.
func (c *cluster) v1URL(i int, key, query string) string {
	u := c.url(i) + "/v1/kv/" + escapeAll(key)
	if query != "" {
		u += "?" + query
	}
	return u
}

func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '~' {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// version is the number in r's ETag header ("N"), or 0 and false.
func version(r result) (uint64, bool) {
	e := r.h.Get("ETag")
	if len(e) < 3 || e[0] != '"' || e[len(e)-1] != '"' {
		return 0, false
	}
	v, err := strconv.ParseUint(e[1:len(e)-1], 10, 64)
	return v, err == nil
}

// eventually polls f until it returns "" or timeout passes (then fails
// with f's last reason).
func eventually(t *testing.T, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := f()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apiError is the contract's error body.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// isJSONError reports whether body is a contract error body.
func isJSONError(body string) bool {
	var e apiError
	return json.Unmarshal([]byte(body), &e) == nil && e.Error != "" && e.Message != ""
}

// errorCode checks that r is a JSON error (Content-Type and body) and
// returns its code, or a description of what is wrong.
func errorCode(r result) (string, bool) {
	if r.code == 0 {
		return r.String(), false
	}
	if ct := r.h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Sprintf("Content-Type %q, not application/json, body %.200q", ct, r.body), false
	}
	var e apiError
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" || e.Message == "" {
		return fmt.Sprintf("body %.200q is not {\"error\",\"message\"}", r.body), false
	}
	return e.Error, true
}
