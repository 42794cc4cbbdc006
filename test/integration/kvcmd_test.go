package integration

import (
	"os/exec"
	"strings"
	"testing"
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
