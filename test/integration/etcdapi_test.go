package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEtcdAPI drives a real three-node Cairn through etcd's own Go client
// and, when Debian's etcd-client is installed, etcdctl.
func TestEtcdAPI(t *testing.T) {
	eps := newCluster(t, 3).etcdEndpoints(t)
	t.Run("ClientV3", func(t *testing.T) { testClientV3(t, eps) })
	t.Run("Etcdctl", func(t *testing.T) { testEtcdctl(t, eps[1]) })
}

// etcdEndpoints returns the nodes' etcd API addresses.
func (c *cluster) etcdEndpoints(t *testing.T) []string {
	t.Helper()
	var eps []string
	for i := 1; i <= c.lc.Size(); i++ {
		a := c.lc.Node(i).EtcdAddr
		if a == "" {
			t.Fatalf("node %d has no etcd API address", i)
		}
		eps = append(eps, a)
	}
	return eps
}

func newEtcdClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testClientV3(t *testing.T, eps []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One client per node: every node serves every key (forwarding to
	// the key's shard leader).
	var clis []*clientv3.Client
	for _, ep := range eps {
		clis = append(clis, newEtcdClient(t, []string{ep}))
	}
	put, err := clis[0].Put(ctx, "etcd/a", "1")
	if err != nil || put.Header.Revision == 0 {
		t.Fatalf("put: %v %v", put, err)
	}
	for i, cli := range clis {
		got, err := cli.Get(ctx, "etcd/a")
		if err != nil || got.Count != 1 || string(got.Kvs[0].Value) != "1" || got.Kvs[0].ModRevision != put.Header.Revision {
			t.Fatalf("get via node %d: %v %v, want 1 at revision %d", i+1, got, err, put.Header.Revision)
		}
	}
	// A serializable read through another node eventually sees the write.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := clis[2].Get(ctx, "etcd/a", clientv3.WithSerializable())
		if err == nil && got.Count == 1 && string(got.Kvs[0].Value) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serializable get via node 3: %v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Compare-and-swap through etcd's Txn: the first wins, the second
	// (comparing with the old value) fails and changes nothing.
	cas := func(cli *clientv3.Client, from, to string) (*clientv3.TxnResponse, error) {
		return cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("etcd/a"), "=", from)).
			Then(clientv3.OpPut("etcd/a", to)).Else(clientv3.OpGet("etcd/a")).Commit()
	}
	if r, err := cas(clis[1], "1", "2"); err != nil || !r.Succeeded {
		t.Fatalf("cas 1→2: %v %v", r, err)
	}
	r, err := cas(clis[2], "1", "3")
	if err != nil || r.Succeeded || string(r.Responses[0].GetResponseRange().Kvs[0].Value) != "2" {
		t.Fatalf("cas 1→3 after 1→2: %v %v, want failure reading 2", r, err)
	}
	// Create-if-absent, as etcd's locks do it.
	create := func() (*clientv3.TxnResponse, error) {
		return clis[0].Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("etcd/lock"), "=", 0)).
			Then(clientv3.OpPut("etcd/lock", "me")).Commit()
	}
	if r, err := create(); err != nil || !r.Succeeded {
		t.Fatalf("create if absent: %v %v", r, err)
	}
	if r, err := create(); err != nil || r.Succeeded {
		t.Fatalf("second create if absent: %v %v, want failure", r, err)
	}
	del, err := clis[1].Delete(ctx, "etcd/a", clientv3.WithPrevKV())
	if err != nil || del.Deleted != 1 || string(del.PrevKvs[0].Value) != "2" {
		t.Fatalf("delete: %v %v", del, err)
	}
	if got, err := clis[0].Get(ctx, "etcd/a"); err != nil || got.Count != 0 {
		t.Fatalf("get after delete: %v %v", got, err)
	}
	ml, err := clis[0].MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list: %v %v", ml, err)
	}
	for i, ep := range eps {
		st, err := clis[i].Status(ctx, ep)
		if err != nil || st.Header.MemberId != uint64(i+1) || st.Leader == 0 {
			t.Fatalf("status of %s: %v %v", ep, st, err)
		}
	}
	// Prefix ranges across every shard, merged in key order, with limit
	// and sort; a prefix delete.
	for i := range 300 {
		if _, err := clis[i%3].Put(ctx, fmt.Sprintf("etcd/p/%03d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := clis[1].Get(ctx, "etcd/p/", clientv3.WithPrefix())
	if err != nil || all.Count != 300 || len(all.Kvs) != 300 || string(all.Kvs[0].Key) != "etcd/p/000" || string(all.Kvs[299].Value) != "299" {
		t.Fatalf("get --prefix etcd/p/: count %d, %d kvs, %v", all.Count, len(all.Kvs), err)
	}
	lim, err := clis[2].Get(ctx, "etcd/p/", clientv3.WithPrefix(), clientv3.WithLimit(5), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil || len(lim.Kvs) != 5 || string(lim.Kvs[0].Key) != "etcd/p/299" || !lim.More || lim.Count != 300 {
		t.Fatalf("get --prefix --limit 5 descending: %v %v", lim, err)
	}
	pdel, err := clis[0].Delete(ctx, "etcd/p/", clientv3.WithPrefix())
	if err != nil || pdel.Deleted != 300 {
		t.Fatalf("del --prefix: %v %v", pdel, err)
	}
	if got, err := clis[0].Get(ctx, "etcd/p/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || got.Count != 0 {
		t.Fatalf("count after del --prefix: %v %v", got, err)
	}
	// What Cairn does not serve answers a clear error, never hangs; a
	// login on a cluster without --auth says authentication is off, as
	// etcd does.
	_, err = clis[0].UserAdd(ctx, "user", "password")
	if status.Code(errors.Unwrap(err)) != codes.Unimplemented && status.Code(err) != codes.Unimplemented {
		t.Fatalf("user add: %v, want Unimplemented", err)
	}
	if _, err = clis[0].Authenticate(ctx, "user", "password"); !errors.Is(err, rpctypes.ErrAuthNotEnabled) {
		t.Fatalf("authenticate: %v, want %v", err, rpctypes.ErrAuthNotEnabled)
	}
}

// testEtcdctl runs etcdctl (Debian's etcd-client) against one node.
func testEtcdctl(t *testing.T, ep string) {
	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl is not installed (apt-get install etcd-client); make test installs it when it can")
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints=" + ep}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("", "put", "ctl/a", "1"); strings.TrimSpace(out) != "OK" {
		t.Fatalf("etcdctl put: %q", out)
	}
	if out := run("", "get", "ctl/a"); out != "ctl/a\n1\n" {
		t.Fatalf("etcdctl get: %q", out)
	}
	// Interactive compare-and-swap: compares, blank line, success ops,
	// blank line, failure ops, blank line.
	out := run("value(\"ctl/a\") = \"1\"\n\nput ctl/a 2\n\nget ctl/a\n\n", "txn")
	if !strings.HasPrefix(out, "SUCCESS") {
		t.Fatalf("etcdctl txn: %q, want SUCCESS", out)
	}
	if out := run("", "get", "ctl/a", "--print-value-only"); out != "2\n" {
		t.Fatalf("etcdctl get after txn: %q", out)
	}
	if out := run("", "del", "ctl/a"); strings.TrimSpace(out) != "1" {
		t.Fatalf("etcdctl del: %q", out)
	}
	run("", "put", "ctl/b", "2")
	run("", "put", "ctl/c", "3")
	if out := run("", "get", "--prefix", "ctl/"); out != "ctl/b\n2\nctl/c\n3\n" {
		t.Fatalf("etcdctl get --prefix ctl/: %q", out)
	}
	if out := run("", "get", "--prefix", "", "--keys-only"); !strings.Contains(out, "ctl/b") || !strings.Contains(out, "ctl/c") {
		t.Fatalf("etcdctl get --prefix \"\": %q", out)
	}
	if out := run("", "del", "--prefix", "ctl/"); strings.TrimSpace(out) != "2" {
		t.Fatalf("etcdctl del --prefix ctl/: %q", out)
	}
	if out := run("", "endpoint", "status"); !strings.Contains(out, ep) {
		t.Fatalf("etcdctl endpoint status: %q", out)
	}
	if out := run("", "endpoint", "health"); !strings.Contains(out, "is healthy") {
		t.Fatalf("etcdctl endpoint health: %q", out)
	}
	if out := run("", "member", "list"); strings.Count(out, "started") != 3 {
		t.Fatalf("etcdctl member list: %q", out)
	}
	// watch, bounded: from the revision of a put, so the event is there
	// however late etcdctl starts.
	rev := run("", "put", "ctl/w", "watched", "-w", "json")
	i := strings.Index(rev, `"revision":`)
	if i < 0 {
		t.Fatalf("etcdctl put -w json: %q", rev)
	}
	n := strings.TrimLeft(rev[i+len(`"revision":`):], " ")
	n = n[:strings.IndexAny(n, ",}")]
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	w := exec.CommandContext(wctx, bin, "--endpoints="+ep, "watch", "ctl/w", "--rev="+n)
	wout, _ := w.CombinedOutput() // ended by the timeout
	if !strings.Contains(string(wout), "PUT\nctl/w\nwatched") {
		t.Fatalf("etcdctl watch ctl/w --rev=%s: %q", n, wout)
	}
	if out := run("", "lease", "grant", "10"); !strings.Contains(out, "granted with TTL(10s)") {
		t.Fatalf("etcdctl lease grant 10: %q", out)
	}
}
