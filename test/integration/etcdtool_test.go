package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdBenchmarkTool runs etcd's own benchmark tool (built from etcd's
// Go modules by tools/etcd-benchmark, as make etcd-benchmark does) against
// a real three-node Cairn: its put, range and txn-put cases must end with
// no error, and the keys it wrote must be there. It skips, saying why,
// when the tool cannot be built (no Go module proxy).
func TestEtcdBenchmarkTool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(t.TempDir(), "etcd-benchmark")
	build := exec.Command("go", "build", "-o", tool, "go.etcd.io/etcd/v3/tools/benchmark")
	build.Dir = filepath.Join(root, "tools", "etcd-benchmark")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("etcd's benchmark tool could not be built from the Go module proxy: %v\n%s", err, out)
	}
	c := newCluster(t, 3)
	eps := c.etcdEndpoints(t)
	endpoints := "--endpoints=" + strings.Join(eps, ",")
	cli := newEtcdClient(t, eps)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "foo", "bar"); err != nil {
		t.Fatal(err)
	}
	// The tool's keys are varints of the key number in 8 bytes: key 0 is
	// all zero bytes, which Cairn must take as an etcd key like any other.
	const puts = 2000
	cases := [][]string{
		{"--conns=10", "--clients=100", "put", "--key-size=8", "--val-size=256", "--sequential-keys", "--key-space-size=100000", "--total=" + strconv.Itoa(puts)},
		{"--conns=10", "--clients=100", "range", "foo", "--consistency=l", "--total=2000"},
		{"--conns=10", "--clients=100", "range", "foo", "--consistency=s", "--total=2000"},
		{"--conns=10", "--clients=100", "txn-put", "--key-size=8", "--val-size=256", "--key-space-size=100000", "--total=1000"},
		{"--conns=1", "--clients=1", "put", "--key-size=8", "--val-size=256", "--sequential-keys", "--key-space-size=100000", "--total=100"},
	}
	rps := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	for _, args := range cases {
		cmd := exec.CommandContext(ctx, tool, append([]string{endpoints}, args...)...)
		out, err := cmd.Output() // the tool's client logs its retries on stderr
		name := strings.Join(args, " ")
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if strings.Contains(string(out), "Error distribution") {
			t.Fatalf("%s: the tool saw errors:\n%s", name, out)
		}
		m := rps.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no summary in the tool's output:\n%s", name, out)
		}
		t.Logf("%s: %s requests/s", name, m[1])
	}
	// Every key the put case wrote is there (0 through puts-1), key 0
	// (all zero bytes) among them, with the tool's 256-byte value.
	all, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if all.Count < puts+1 {
		t.Fatalf("%d keys after %d distinct puts and foo", all.Count, puts)
	}
	zero, err := cli.Get(ctx, string(make([]byte, 8)))
	if err != nil || len(zero.Kvs) != 1 || len(zero.Kvs[0].Value) != 256 {
		t.Fatalf("key 0 (eight zero bytes): %v %v, want a 256-byte value", zero, err)
	}
}
