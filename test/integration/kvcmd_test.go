package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/lab/launcher"
)

func TestKVCommand(t *testing.T) {
	c := newCluster(t, 3)
	eps := "--endpoints=" + c.url(1) + "," + c.url(2) + "," + c.url(3)
	run := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(binary, append([]string{"kv"}, append(args, eps)...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	ver, code := run("", "put", "a/key", "hello")
	if code != 0 || strings.TrimSpace(ver) == "" {
		t.Fatalf("put: %q exit %d", ver, code)
	}
	if out, code := run("", "get", "a/key"); code != 0 || out != "hello" {
		t.Fatalf("get: %q exit %d", out, code)
	}
	if _, code := run("", "put", "a/key", "again", "--if-absent"); code != 1 {
		t.Fatalf("put --if-absent on an existing key: exit %d", code)
	}
	if _, code := run("from stdin", "put", "a/key", "-", "--if-match", strings.TrimSpace(ver)); code != 0 {
		t.Fatalf("put --if-match with the current version: exit %d", code)
	}
	if out, _ := run("", "get", "a/key", "--serializable"); out != "from stdin" && out != "hello" {
		t.Fatalf("serializable get: %q", out)
	}
	if out, code := run("", "get", "a/key"); code != 0 || out != "from stdin" {
		t.Fatalf("get after put from stdin: %q exit %d", out, code)
	}
	if _, code := run("", "del", "a/key"); code != 0 {
		t.Fatalf("del: exit %d", code)
	}
	if _, code := run("", "get", "a/key"); code != 1 {
		t.Fatalf("get after del: exit %d", code)
	}
	if _, code := run("", "get"); code != 2 {
		t.Fatalf("get without a key: exit %d, want 2 (usage)", code)
	}
}

// Defect "cairn kv rough edges": with no node listening the command fails
// well before its deadline, says the nodes refused the connection (not
// "timeout"), and prefixes its message once.
func TestKVCommandNoNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	addrs, err := launcher.FreeAddrs([]string{"127.0.0.1", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	eps := "--endpoints=http://" + addrs[0] + ",http://" + addrs[1] // nobody listens there
	for _, args := range [][]string{{"get", "k"}, {"put", "k", "v"}, {"del", "k"}} {
		cmd := exec.Command(binary, append(append([]string{"kv"}, args...), eps, "--timeout", "30s")...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		msg := stderr.String()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("kv %v with no node: %v, want exit 1\n%s", args, err, msg)
		}
		if took > 15*time.Second {
			t.Errorf("kv %v waited %v of its 30s deadline for nodes that refuse connections", args, took)
		}
		if strings.Count(msg, "cairn:") != 1 || !strings.HasPrefix(msg, "cairn: ") {
			t.Errorf("kv %v: want one \"cairn:\" prefix: %q", args, msg)
		}
		if !strings.Contains(msg, "connection refused") || strings.Contains(msg, "timeout") {
			t.Errorf("kv %v: want \"connection refused\", no \"timeout\": %q", args, msg)
		}
	}
}
