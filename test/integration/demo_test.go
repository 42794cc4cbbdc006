package integration

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freeBase finds P such that P..P+n-1 and P+1000..P+1000+n-1 are free.
func freeBase(t *testing.T, n int) int {
	for try := 0; try < 50; try++ {
		p := 20000 + rand.Intn(20000)
		ok := true
		for i := 0; i < n && ok; i++ {
			for _, port := range []int{p + i, p + 1000 + i} {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port range")
	return 0
}

type demoProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	ready  chan struct{}
	done   chan error
}

func startDemo(t *testing.T, args ...string) *demoProc {
	t.Helper()
	d := &demoProc{cmd: exec.Command(binary, append([]string{"demo"}, args...)...), ready: make(chan struct{}), done: make(chan error, 1)}
	out, _ := d.cmd.StdoutPipe()
	errp, _ := d.cmd.StderrPipe()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			d.mu.Lock()
			d.stdout.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			if strings.Contains(sc.Text(), "Ctrl-C") {
				once.Do(func() { close(d.ready) })
			}
		}
	}()
	go func() {
		defer pipes.Done()
		b := make([]byte, 4096)
		for {
			n, err := errp.Read(b)
			d.mu.Lock()
			d.stderr.Write(b[:n])
			d.mu.Unlock()
			if err == io.EOF || err != nil {
				return
			}
		}
	}()
	go func() { pipes.Wait(); d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("demo stdout:\n%s\ndemo stderr (tail):\n%s", d.out(), tail(d.errText(), 30))
		}
	})
	select {
	case <-d.ready:
	case err := <-d.done:
		t.Fatalf("demo exited before it was ready: %v\n%s", err, d.errText())
	case <-time.After(40 * time.Second):
		t.Fatalf("demo not ready within 40s:\n%s", tail(d.errText(), 30))
	}
	return d
}

func (d *demoProc) out() string     { d.mu.Lock(); defer d.mu.Unlock(); return d.stdout.String() }
func (d *demoProc) errText() string { d.mu.Lock(); defer d.mu.Unlock(); return d.stderr.String() }

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (d *demoProc) terminate(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("demo exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop within 30s of SIGTERM")
	}
}

func servePIDs(dataDir string) []int {
	out, _ := exec.Command("pgrep", "-f", "serve.*"+dataDir).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		var p int
		fmt.Sscan(f, &p)
		pids = append(pids, p)
	}
	return pids
}

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	if _, err := exec.LookPath("pgrep"); err != nil {
		t.Skip("pgrep not available")
	}
	p := freeBase(t, 3)
	// The default peer port of node 1 (http-port+1000) is taken: the demo
	// picks other free peer ports and a rerun uses the same ones.
	busy, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1000))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	args := []string{"--nodes", "3", "--http-port", fmt.Sprint(p), "--data-dir", dir}
	d := startDemo(t, args...)
	for i := 0; i < 3; i++ {
		if !strings.Contains(d.out(), fmt.Sprintf("http://127.0.0.1:%d", p+i)) {
			t.Fatalf("endpoint of node %d not printed:\n%s", i+1, d.out())
		}
	}
	if !strings.Contains(d.out(), "curl") {
		t.Fatal("no curl example printed")
	}
	if strings.Contains(d.out(), fmt.Sprintf("peer 127.0.0.1:%d)", p+1000)) {
		t.Fatalf("node given the busy peer port %d:\n%s", p+1000, d.out())
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("PUT", fmt.Sprintf("http://127.0.0.1:%d/v0/entity?id=demo", p+1), strings.NewReader("persisted"))
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT through the demo: %v %v", resp, err)
	}
	resp.Body.Close()
	if n := len(servePIDs(dir)); n != 3 {
		t.Fatalf("%d node processes running, want 3", n)
	}
	d.terminate(t)
	if pids := servePIDs(dir); len(pids) != 0 {
		t.Fatalf("nodes still running after the demo stopped: %v", pids)
	}

	// Same data dir: the same data comes back.
	d = startDemo(t, args...)
	resp, err = hc.Get(fmt.Sprintf("http://127.0.0.1:%d/v0/entity?id=demo", p+2))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "persisted" {
		t.Fatalf("after demo restart: %d %q", resp.StatusCode, body)
	}
	// A node that dies is reported.
	pids := servePIDs(dir)
	if len(pids) == 0 {
		t.Fatal("no node processes")
	}
	_ = syscall.Kill(pids[0], syscall.SIGKILL)
	eventually(t, 10*time.Second, func() string {
		if !strings.Contains(d.errText(), "exited unexpectedly") {
			return "death of a node not reported"
		}
		return ""
	})
	d.terminate(t)
}

func TestDemoRefusesBusyPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cmd := exec.Command(binary, "demo", "--http-port", fmt.Sprint(port), "--data-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not free") {
		t.Fatalf("demo on a busy port: err=%v\n%s", err, out)
	}
}
