package integration

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	startTries   = 3                // fresh ports after a bind failure
)

// node is one `cairn serve` process (possibly restarted many times).
type node struct {
	id       int
	httpAddr string
	peerAddr string
	dir      string // data dir, kept across restarts
	logPath  string // stderr and stdout of every run, appended

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current run has exited
	expected bool          // the harness signalled this run
	unexpect []string      // runs that exited on their own
}

// cluster is a set of real nodes started by one test. Every process is
// killed in t.Cleanup; on failure each node's log tail is printed.
type cluster struct {
	t     *testing.T
	nodes []*node
	args  []string // flags common to every node
	hc    *http.Client
}

// newCluster starts n nodes (ids 1..n, replication min(3, n), 16 shards)
// with the extra serve flags and waits until every shard has a leader.
// A bind failure (another process took a port between picking and
// binding it) restarts the whole cluster on fresh ports.
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
	base := t.TempDir()
	t.Cleanup(c.cleanup)
	for try := 1; ; try++ {
		err := c.tryStart(filepath.Join(base, fmt.Sprint("try-", try)), n, extra)
		if err == nil {
			break
		}
		c.killAll()
		if !errors.Is(err, errAddrInUse) || try == startTries {
			t.Fatalf("starting a %d-node cluster: %v", n, err)
		}
		t.Logf("start attempt %d: %v; retrying on fresh ports", try, err)
	}
	c.waitReady(readyTimeout)
	return c
}

var errAddrInUse = errors.New("address already in use")

func (c *cluster) tryStart(dir string, n int, extra []string) error {
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	c.nodes = nil
	var peers []string
	for i := 1; i <= n; i++ {
		nd := &node{id: i, httpAddr: addrs[2*i-2], peerAddr: addrs[2*i-1],
			dir: filepath.Join(dir, fmt.Sprint("node-", i)), logPath: filepath.Join(dir, fmt.Sprintf("node-%d.log", i))}
		c.nodes = append(c.nodes, nd)
		peers = append(peers, fmt.Sprintf("%d=%s", i, nd.peerAddr))
	}
	c.args = append([]string{"--initial-cluster", strings.Join(peers, ","), "--shards", "16",
		"--replication", fmt.Sprint(min(3, n))}, extra...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if err := c.launch(i); err != nil {
			return err
		}
	}
	// Every node either answers or has exited; an exit is a failed start.
	deadline := time.Now().Add(readyTimeout)
	for i := 1; i <= n; i++ {
		for {
			if !c.running(i) {
				log := c.log(i)
				if strings.Contains(log, "address already in use") {
					return fmt.Errorf("node %d: %w", i, errAddrInUse)
				}
				return fmt.Errorf("node %d exited at start:\n%s", i, tail(log, 20))
			}
			if code, _, _ := c.get(i, "/v1/status"); code == 200 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %d does not answer /v1/status after %v", i, readyTimeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// freeAddrs returns n distinct 127.0.0.1 addresses that were free a moment
// ago: all are held open together so none repeats, then released.
func freeAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func (c *cluster) node(i int) *node { return c.nodes[i-1] }

// url of node i's HTTP API.
func (c *cluster) url(i int) string { return "http://" + c.node(i).httpAddr }

// running reports whether node i's process is alive.
func (c *cluster) running(i int) bool {
	nd := c.node(i)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// launch starts node i on its data dir with the cluster's flags.
func (c *cluster) launch(i int) error {
	nd := c.node(i)
	if c.running(i) {
		return fmt.Errorf("node %d is already running", i)
	}
	logf, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"serve", "--node-id", fmt.Sprint(nd.id), "--http-addr", nd.httpAddr,
		"--peer-addr", nd.peerAddr, "--data-dir", nd.dir}, c.args...)
	fmt.Fprintf(logf, "=== harness %s: starting node %d: cairn %s\n", time.Now().Format("15:04:05.000"), nd.id, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	nd.mu.Lock()
	nd.cmd, nd.exited, nd.expected = cmd, exited, false
	nd.mu.Unlock()
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		if !nd.expected {
			nd.unexpect = append(nd.unexpect, fmt.Sprintf("pid %d exited on its own: %v", cmd.Process.Pid, err))
		}
		nd.mu.Unlock()
		fmt.Fprintf(logf, "=== harness %s: node %d exited: %v\n", time.Now().Format("15:04:05.000"), nd.id, err)
		logf.Close()
		close(exited)
	}()
	return nil
}

// start (re)starts node i on its data dir; it does not wait for readiness.
func (c *cluster) start(i int) {
	c.t.Helper()
	if err := c.launch(i); err != nil {
		c.t.Fatalf("starting node %d: %v", i, err)
	}
}

// stop sends SIGTERM to node i and waits for a clean exit (status 0). A
// node that does not stop within exitTimeout is killed and the test fails.
func (c *cluster) stop(i int) {
	c.t.Helper()
	if err := c.signal(i, syscall.SIGTERM); err != nil {
		c.t.Errorf("SIGTERM of node %d: %v", i, err)
	}
}

// kill sends SIGKILL to node i and waits for it to exit.
func (c *cluster) kill(i int) {
	c.t.Helper()
	if err := c.signal(i, syscall.SIGKILL); err != nil && !strings.Contains(err.Error(), "killed") {
		c.t.Errorf("SIGKILL of node %d: %v", i, err)
	}
}

// signal sends s to node i and waits (bounded) for it to exit; it returns
// the exit error.
func (c *cluster) signal(i int, s syscall.Signal) error {
	nd := c.node(i)
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	if cmd == nil {
		nd.mu.Unlock()
		return nil
	}
	select {
	case <-exited:
		nd.mu.Unlock()
		return nil // already gone (an unexpected exit is reported at cleanup)
	default:
	}
	nd.expected = true
	nd.mu.Unlock()
	_ = cmd.Process.Signal(s)
	select {
	case <-exited:
	case <-time.After(exitTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("no exit within %v of %v (killed)", exitTimeout, s)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("exit: %v", cmd.ProcessState)
	}
	return nil
}

func (c *cluster) killAll() {
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.signal(i+1, syscall.SIGKILL) }()
	}
	wg.Wait()
}

func (c *cluster) cleanup() {
	c.killAll()
	for _, nd := range c.nodes {
		nd.mu.Lock()
		for _, u := range nd.unexpect {
			c.t.Errorf("node %d: %s", nd.id, u)
		}
		nd.mu.Unlock()
	}
	if !c.t.Failed() {
		return
	}
	for _, nd := range c.nodes {
		log := c.log(nd.id)
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
			nd.id, nd.httpAddr, strings.Count(log, "\n"), strings.Join(notable, "\n"), nd.id, tail(strings.TrimSpace(log), 50))
	}
}

// log returns everything node i wrote so far.
func (c *cluster) log(i int) string {
	b, _ := os.ReadFile(c.node(i).logPath)
	return string(b)
}

// waitReady polls until every running node answers GET /v1/status 200 and
// sees a running leader for every shard in GET /v1/cluster.
func (c *cluster) waitReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := c.notReady()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not ready after %v: %s", timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) notReady() string {
	for i := 1; i <= len(c.nodes); i++ {
		if !c.running(i) {
			continue
		}
		if code, body, err := c.get(i, "/v1/status"); code != 200 {
			return fmt.Sprintf("node %d status: %d %v %.200s", i, code, err, body)
		}
		ci, err := c.clusterInfo(i)
		if err != nil {
			return fmt.Sprintf("node %d cluster: %v", i, err)
		}
		if len(ci.Shards) == 0 {
			return fmt.Sprintf("node %d reports no shards", i)
		}
		for _, s := range ci.Shards {
			if s.Leader == 0 || int(s.Leader) > len(c.nodes) || !c.running(int(s.Leader)) {
				return fmt.Sprintf("node %d sees no running leader of shard %d (leader %d)", i, s.ID, s.Leader)
			}
		}
	}
	return ""
}

// clusterInfo is the part of GET /v1/cluster the tests read.
type clusterInfo struct {
	NodeID      uint64 `json:"node_id"`
	Replication int    `json:"replication"`
	Members     []struct {
		NodeID uint64 `json:"node_id"`
	} `json:"members"`
	Shards []shardInfo `json:"shards"`
}

type shardInfo struct {
	ID         uint64   `json:"id"`
	TokenStart string   `json:"token_start"`
	TokenEnd   string   `json:"token_end"`
	Replicas   []uint64 `json:"replicas"`
	Leader     uint64   `json:"leader"`
	Applied    uint64   `json:"applied"`
}

// contains reports whether the shard owns token t ([start, end), end in
// hex, "10000000000000000" meaning 2^64).
func (s shardInfo) contains(t uint64) bool {
	start, err := strconv.ParseUint(s.TokenStart, 16, 64)
	if err != nil || t < start {
		return false
	}
	end, err := strconv.ParseUint(s.TokenEnd, 16, 64)
	return err != nil || t < end // err: the end is 2^64
}

func (c *cluster) clusterInfo(i int) (clusterInfo, error) {
	var ci clusterInfo
	code, body, err := c.get(i, "/v1/cluster")
	if err != nil {
		return ci, err
	}
	if code != 200 {
		return ci, fmt.Errorf("GET /v1/cluster: %d %.200s", code, body)
	}
	return ci, json.Unmarshal([]byte(body), &ci)
}

// leaderCounts returns how many shards each node leads (0: no leader
// known), as the first running node sees it.
func (c *cluster) leaderCounts() map[int]int {
	c.t.Helper()
	for i := 1; i <= len(c.nodes); i++ {
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
// shard map and the same token function as the server (xxhash64).
func (c *cluster) shardOf(i int, keys []string) map[string]uint64 {
	c.t.Helper()
	ci, err := c.clusterInfo(i)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, k := range keys {
		t := xxhash64([]byte(k))
		for _, s := range ci.Shards {
			if s.contains(t) {
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
		t := xxhash64([]byte(k))
		for _, s := range ci.Shards {
			if s.contains(t) && count[s.ID] < perShard {
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

// xxhash64 is XXH64 with seed 0 (the server's token function, from
// github.com/cespare/xxhash/v2, re-implemented to keep this package on the
// standard library; TestXXHash64 pins it to known values).
func xxhash64(b []byte) uint64 {
	const (
		p1 uint64 = 11400714785074694791
		p2 uint64 = 14029467366897019727
		p3 uint64 = 1609587929392839161
		p4 uint64 = 9650029242287828579
		p5 uint64 = 2870177450012600261
	)
	round := func(acc, in uint64) uint64 { return bits.RotateLeft64(acc+in*p2, 31) * p1 }
	merge := func(h, v uint64) uint64 { return (h^round(0, v))*p1 + p4 }
	n := uint64(len(b))
	var h uint64
	if len(b) >= 32 {
		v1, v2, v3, v4 := p1, p2, uint64(0), uint64(0)
		v1 += p2
		v4 -= p1
		for ; len(b) >= 32; b = b[32:] {
			v1 = round(v1, bin.LittleEndian.Uint64(b[0:]))
			v2 = round(v2, bin.LittleEndian.Uint64(b[8:]))
			v3 = round(v3, bin.LittleEndian.Uint64(b[16:]))
			v4 = round(v4, bin.LittleEndian.Uint64(b[24:]))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = merge(merge(merge(merge(h, v1), v2), v3), v4)
	} else {
		h = p5
	}
	h += n
	for ; len(b) >= 8; b = b[8:] {
		h = bits.RotateLeft64(h^round(0, bin.LittleEndian.Uint64(b)), 27)*p1 + p4
	}
	if len(b) >= 4 {
		h = bits.RotateLeft64(h^uint64(bin.LittleEndian.Uint32(b))*p1, 23)*p2 + p3
		b = b[4:]
	}
	for _, ch := range b {
		h = bits.RotateLeft64(h^uint64(ch)*p5, 11) * p1
	}
	h ^= h >> 33
	h *= p2
	h ^= h >> 29
	h *= p3
	h ^= h >> 32
	return h
}

func TestXXHash64(t *testing.T) {
	for in, want := range map[string]uint64{
		"":    0xef46db3751d8e999,
		"a":   0xd24ec4f1a98c6e5b,
		"abc": 0x44bc2cf5ad770999,
		"Nobody inspects the spammish repetition": 0xfbcea83c8a378bf1,
	} {
		if got := xxhash64([]byte(in)); got != want {
			t.Errorf("xxhash64(%q) = %016x, want %016x", in, got, want)
		}
	}
}
