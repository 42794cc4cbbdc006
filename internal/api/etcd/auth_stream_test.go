package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/api/auth/authtest"
)

// errStoreDown is what the token records' store answers while it cannot
// be read (their shard has no leader).
var errStoreDown = errors.New("kv: shard has no leader")

// countedAuth is an Authenticator that counts its checks and, while
// down, answers what auth.Authenticator answers when its store cannot be
// read. (The real one would answer from its cache for up to
// auth.CacheTTL first; this is what it answers once the cache lapses.)
type countedAuth struct {
	Authenticator
	checks atomic.Int64
	down   atomic.Bool
}

func (c *countedAuth) Authenticate(ctx context.Context, tok string) (auth.Role, error) {
	c.checks.Add(1)
	if c.down.Load() {
		return auth.RoleNone, fmt.Errorf("auth: look the token up: %w", errStoreDown)
	}
	return c.Authenticator.Authenticate(ctx, tok)
}

// streamAuthServer serves a Server checking tokens with a real
// authenticator (over a store in memory) and re-checking open streams'
// tokens every interval, and returns a connection to it.
func streamAuthServer(t *testing.T, interval time.Duration) (*grpc.ClientConn, *auth.Authenticator, *countedAuth, *fakeBackend) {
	t.Helper()
	f := newFake()
	a := auth.New(authtest.NewStore())
	ca := &countedAuth{Authenticator: a}
	s, err := New(f, Config{ClusterID: 7, MemberID: 1, Auth: ca, StreamAuthInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	return serveConn(t, s), a, ca, f
}

// openWatch opens a watch stream with tok, bounded by within, and
// watches key on it.
func openWatch(t *testing.T, conn *grpc.ClientConn, tok, key string, within time.Duration) pb.Watch_WatchClient {
	t.Helper()
	sctx, cancel := context.WithTimeout(withToken(tok), within)
	t.Cleanup(cancel)
	st, err := pb.NewWatchClient(conn).Watch(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := create(t, st, &pb.WatchCreateRequest{Key: []byte(key)}); !r.Created || r.Canceled {
		t.Fatalf("watch %s: %v", key, r)
	}
	return st
}

// nextEvent receives the next event on st and checks it is value.
func nextEvent(t *testing.T, st pb.Watch_WatchClient, value string) {
	t.Helper()
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("the stream ended before the event %q: %v", value, err)
		}
		if len(r.Events) == 0 {
			continue
		}
		if got := string(r.Events[0].Kv.Value); got != value {
			t.Fatalf("event %q, want %q", got, value)
		}
		return
	}
}

// streamEnd receives on st until it ends, and answers how.
func streamEnd(st pb.Watch_WatchClient) error {
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}

// waitChecks waits up to 5 s until ca has made n more checks than it
// had made; false if it has not.
func waitChecks(ca *countedAuth, n int64) bool {
	want := ca.checks.Load() + n
	deadline := time.Now().Add(5 * time.Second)
	for ca.checks.Load() < want {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// An open watch stream on which the client sends nothing more ends with
// etcd's invalid-token error soon after its token is revoked, and so
// does an idle keep-alive stream; their checks end with them.
func TestAuthStreamEndsWhenTokenRevoked(t *testing.T) {
	const interval = 50 * time.Millisecond
	conn, a, ca, f := streamAuthServer(t, interval)
	tok, err := a.Create(ctx, auth.RoleWrite)
	if err != nil {
		t.Fatal(err)
	}
	st := openWatch(t, conn, tok, "k", 10*time.Second)
	f.set("k", "v1")
	nextEvent(t, st, "v1")
	lc := pb.NewLeaseClient(conn)
	g, err := lc.LeaseGrant(withToken(tok), &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	kctx, kcancel := context.WithTimeout(withToken(tok), 10*time.Second)
	defer kcancel()
	ka, err := lc.LeaseKeepAlive(kctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&pb.LeaseKeepAliveRequest{ID: g.ID}); err != nil {
		t.Fatal(err)
	}
	if r, err := ka.Recv(); err != nil || r.TTL != 60 {
		t.Fatalf("keep-alive: %v %v", r, err)
	}

	if err := a.Revoke(ctx, auth.TokenID(tok)); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	const bound = 2 * time.Second // the interval, and room for a slow race-detector run
	if err := streamEnd(st); !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
		t.Fatalf("the watch stream of a revoked token: %v, want %v", err, rpctypes.ErrGRPCInvalidAuthToken)
	}
	if _, err := ka.Recv(); !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
		t.Fatalf("the keep-alive stream of a revoked token: %v, want %v", err, rpctypes.ErrGRPCInvalidAuthToken)
	}
	if d := time.Since(revoked); d > bound {
		t.Fatalf("the streams ended %v after the revocation, want within %v", d, bound)
	}
	// Both streams ended: nothing checks their token any more.
	n := ca.checks.Load()
	time.Sleep(5 * interval)
	if m := ca.checks.Load(); m != n {
		t.Fatalf("%d checks after the streams ended", m-n)
	}
}

// An open watch stream ends when its token expires, not before.
func TestAuthStreamEndsWhenTokenExpires(t *testing.T) {
	const interval = 50 * time.Millisecond
	conn, a, _, f := streamAuthServer(t, interval)
	tok, expires, err := a.CreateExpiring(ctx, auth.RoleRead, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	st := openWatch(t, conn, tok, "k", 10*time.Second)
	f.set("k", "v1")
	nextEvent(t, st, "v1")
	err = streamEnd(st)
	ended := time.Now()
	if !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
		t.Fatalf("the watch stream of an expired token: %v, want %v", err, rpctypes.ErrGRPCInvalidAuthToken)
	}
	if ended.Before(expires) {
		t.Fatalf("the stream ended at %v, before its token expired at %v", ended, expires)
	}
	if d := ended.Sub(expires); d > 2*time.Second {
		t.Fatalf("the stream ended %v after its token expired, want within 2s", d)
	}
}

// A stream whose token stays good goes on across its checks; one whose
// token cannot be checked at the moment goes on too (it was good when
// the stream opened), and ends once a check can tell the token is bad.
func TestAuthStreamGoesOnWhileTokenGoodOrUncheckable(t *testing.T) {
	const interval = 20 * time.Millisecond
	conn, a, ca, f := streamAuthServer(t, interval)
	tok, err := a.Create(ctx, auth.RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	st := openWatch(t, conn, tok, "k", 20*time.Second)
	checked := waitChecks(ca, 10)
	f.set("k", "v1")
	nextEvent(t, st, "v1")
	if !checked {
		t.Fatal("an open stream's token is not checked again")
	}

	ca.down.Store(true)
	checked = waitChecks(ca, 10)
	f.set("k", "v2")
	nextEvent(t, st, "v2")
	if !checked {
		t.Fatal("an open stream's token is not checked again while the checks fail")
	}

	// The checks were being made all along: once they can be made
	// again, a revocation ends the stream.
	ca.down.Store(false)
	if err := a.Revoke(ctx, auth.TokenID(tok)); err != nil {
		t.Fatal(err)
	}
	if err := streamEnd(st); !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
		t.Fatalf("after the revocation: %v, want %v", err, rpctypes.ErrGRPCInvalidAuthToken)
	}
}

// Streams that end, by the client or by a refused token, leave nothing
// running on the node: no goroutine, no timer checking their token.
func TestAuthStreamChecksEndWithTheStream(t *testing.T) {
	const interval = 10 * time.Millisecond
	conn, a, ca, _ := streamAuthServer(t, interval)
	tok, err := a.Create(ctx, auth.RoleWrite)
	if err != nil {
		t.Fatal(err)
	}
	lc := pb.NewLeaseClient(conn)
	if _, err := lc.LeaseGrant(withToken(tok), &pb.LeaseGrantRequest{TTL: 60}); err != nil {
		t.Fatal(err) // the connection is up
	}
	baseline := runtime.NumGoroutine()
	settle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > baseline {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("%s: %d goroutines, %d before the streams:\n%s", what, runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(5 * time.Millisecond)
		}
		n := ca.checks.Load()
		time.Sleep(5 * interval)
		if m := ca.checks.Load(); m != n {
			t.Fatalf("%s: %d checks after the streams ended", what, m-n)
		}
	}

	open := func() (sts []pb.Watch_WatchClient, kas []pb.Lease_LeaseKeepAliveClient, cancels []context.CancelFunc) {
		for i := range 20 {
			sctx, cancel := context.WithTimeout(withToken(tok), 10*time.Second)
			cancels = append(cancels, cancel)
			st, err := pb.NewWatchClient(conn).Watch(sctx)
			if err != nil {
				t.Fatal(err)
			}
			if r := create(t, st, &pb.WatchCreateRequest{Key: []byte(fmt.Sprint("k", i))}); !r.Created {
				t.Fatalf("watch: %v", r)
			}
			ka, err := lc.LeaseKeepAlive(sctx)
			if err != nil {
				t.Fatal(err)
			}
			sts, kas = append(sts, st), append(kas, ka)
		}
		if !waitChecks(ca, 100) {
			t.Fatal("open streams' tokens are not checked again")
		}
		return sts, kas, cancels
	}

	// Ended by the client.
	_, _, cancels := open()
	for _, c := range cancels {
		c()
	}
	settle("streams the client canceled")

	// Ended by the revocation of their token.
	sts, kas, cancels := open()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	if err := a.Revoke(ctx, auth.TokenID(tok)); err != nil {
		t.Fatal(err)
	}
	for i := range sts {
		if err := streamEnd(sts[i]); !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
			t.Fatalf("watch stream %d: %v", i, err)
		}
		if _, err := kas[i].Recv(); !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
			t.Fatalf("keep-alive stream %d: %v", i, err)
		}
	}
	settle("streams of a revoked token")
}

// etcd's Go client, logged in with a token, sees its watch end with
// ErrInvalidAuthToken once the token is revoked, as with etcd.
func TestAuthStreamClientv3WatchEnds(t *testing.T) {
	conn, a, _, f := streamAuthServer(t, 50*time.Millisecond)
	tok, err := a.Create(ctx, auth.RoleRead)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{conn.Target()}, Username: "cairn", Password: tok,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wch := cli.Watch(wctx, "k")
	// The watch is created once an event of it comes; write until one does.
	for got := false; !got; {
		f.set("k", "v")
		select {
		case wr := <-wch:
			if err := wr.Err(); err != nil {
				t.Fatalf("watch before the revocation: %v", err)
			}
			got = len(wr.Events) > 0
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := a.Revoke(ctx, auth.TokenID(tok)); err != nil {
		t.Fatal(err)
	}
	var last error
	for wr := range wch {
		if err := wr.Err(); err != nil {
			last = err
		}
	}
	if !errors.Is(last, rpctypes.ErrInvalidAuthToken) {
		t.Fatalf("clientv3's watch after the revocation: %v, want %v", last, rpctypes.ErrInvalidAuthToken)
	}
	if wctx.Err() != nil {
		t.Fatal("the watch lasted until its deadline")
	}
}
