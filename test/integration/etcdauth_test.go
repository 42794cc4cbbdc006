package integration

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testEtcdWithTokens drives the etcd API of a cluster started with
// --auth with etcd's own client and etcdctl, logged in with Cairn tokens
// as passwords: a write token writes, a read token reads and its writes
// are refused with etcd's "permission denied" and change nothing, a call
// without a token gets etcd's "user name is empty", and a login with an
// unknown token fails.
func testEtcdWithTokens(t *testing.T, c *cluster, write, read string) {
	eps := c.etcdEndpoints(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login := func(tok string) (*clientv3.Client, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Username: "cairn", Password: tok})
		if err == nil {
			t.Cleanup(func() { cli.Close() })
		}
		return cli, err
	}
	w, err := login(write)
	if err != nil {
		t.Fatalf("etcd client with a write token: %v", err)
	}
	if _, err := w.Put(ctx, "etcdauth/k", "v1"); err != nil {
		t.Fatalf("etcd put with a write token: %v", err)
	}
	r, err := login(read)
	if err != nil {
		t.Fatalf("etcd client with a read token: %v", err)
	}
	if _, err := r.Put(ctx, "etcdauth/k", "v2"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("etcd put with a read token: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	if _, err := r.Delete(ctx, "etcdauth/k"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("etcd delete with a read token: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	got, err := r.Get(ctx, "etcdauth/k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("etcd get with a read token: %v %v, want v1", got, err)
	}
	if _, err := newEtcdClient(t, eps).Get(ctx, "etcdauth/k"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("etcd get without a token: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if bad, err := login("cairn_unknown"); err == nil {
		if _, err = bad.Get(ctx, "etcdauth/k"); !errors.Is(err, rpctypes.ErrAuthFailed) {
			t.Fatalf("etcd get after a login with an unknown token: %v, want %v", err, rpctypes.ErrAuthFailed)
		}
	} else if !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Fatalf("etcd login with an unknown token: %v, want %v", err, rpctypes.ErrAuthFailed)
	}

	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Log("etcdctl is not installed (apt-get install etcd-client): its part is skipped")
		return
	}
	ctl := func(tok string, args ...string) (string, error) {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, bin, append([]string{"--endpoints=" + eps[0], "--user", "cairn:" + tok}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := ctl(write, "put", "etcdauth/ctl", "1"); err != nil || strings.TrimSpace(out) != "OK" {
		t.Fatalf("etcdctl --user put with a write token: %v %q", err, out)
	}
	if out, err := ctl(read, "get", "etcdauth/ctl", "--print-value-only"); err != nil || out != "1\n" {
		t.Fatalf("etcdctl --user get with a read token: %v %q", err, out)
	}
	if out, err := ctl(read, "put", "etcdauth/ctl", "2"); err == nil || !strings.Contains(out, "permission denied") {
		t.Fatalf("etcdctl --user put with a read token: %v %q, want permission denied", err, out)
	}
	if got, err := w.Get(ctx, "etcdauth/ctl"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" {
		t.Fatalf("etcdauth/ctl after a refused put: %v %v, want 1", got, err)
	}
}
