package etcdapi

import (
	"context"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/api/auth"
)

// tokenRoles is an Authenticator over a table, read at each check.
type tokenRoles struct {
	mu   sync.Mutex
	m    map[string]auth.Role
	down bool // every check fails (not for the token: it cannot be made)
}

func (t *tokenRoles) setDown(down bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.down = down
}

func newRoles(m map[string]auth.Role) *tokenRoles { return &tokenRoles{m: m} }

func (t *tokenRoles) Authenticate(_ context.Context, tok string) (auth.Role, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.down {
		return auth.RoleNone, auth.ErrBusy
	}
	if r, ok := t.m[tok]; ok {
		return r, nil
	}
	return auth.RoleNone, auth.ErrBadToken
}

func (t *tokenRoles) revoke(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, tok)
}

// authConn serves a Server checking tokens of roles on a loopback port
// and returns a connection to it, the backend and the refusal counters.
func authConn(t *testing.T, roles *tokenRoles) (*grpc.ClientConn, *fakeBackend, *auth.Counters) {
	t.Helper()
	f := newFake()
	var c auth.Counters
	s, err := New(f, Config{ClusterID: 7, MemberID: 1, Auth: roles, AuthCounters: &c})
	if err != nil {
		t.Fatal(err)
	}
	return serveConn(t, s), f, &c
}

// withToken sends tok as etcd's clients do after logging in.
func withToken(tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok)
}

func sameError(err, want error) bool {
	return status.Code(err) == status.Code(want) && status.Convert(err).Message() == status.Convert(want).Message()
}

// With Auth set, each call needs a token of its role, refusals are
// etcd's errors and change nothing, and etcd's login answers the token
// it was given as the password.
func TestAuthRolesOnEtcdCalls(t *testing.T) {
	conn, f, counters := authConn(t, newRoles(map[string]auth.Role{"r": auth.RoleRead, "w": auth.RoleWrite, "a": auth.RoleAdmin}))
	kvc, lc, ac, mc := pb.NewKVClient(conn), pb.NewLeaseClient(conn), pb.NewAuthClient(conn), pb.NewMaintenanceClient(conn)
	if _, err := kvc.Put(withToken("w"), &pb.PutRequest{Key: []byte("k"), Value: []byte("v1")}); err != nil {
		t.Fatalf("put with a write token: %v", err)
	}
	readTxn := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}}}
	writeTxn := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("txn")}}}}}}}}}
	for _, tc := range []struct {
		name string
		call func(context.Context) error
		ctx  context.Context
		want error // nil: allowed
	}{
		{"put without a token", func(c context.Context) error {
			_, err := kvc.Put(c, &pb.PutRequest{Key: []byte("k"), Value: []byte("x")})
			return err
		}, ctx, rpctypes.ErrGRPCUserEmpty},
		{"put with an unknown token", func(c context.Context) error {
			_, err := kvc.Put(c, &pb.PutRequest{Key: []byte("k"), Value: []byte("x")})
			return err
		}, withToken("nope"), rpctypes.ErrGRPCInvalidAuthToken},
		{"put with a read token", func(c context.Context) error {
			_, err := kvc.Put(c, &pb.PutRequest{Key: []byte("k"), Value: []byte("x")})
			return err
		}, withToken("r"), rpctypes.ErrGRPCPermissionDenied},
		{"delete with a read token", func(c context.Context) error {
			_, err := kvc.DeleteRange(c, &pb.DeleteRangeRequest{Key: []byte("k")})
			return err
		}, withToken("r"), rpctypes.ErrGRPCPermissionDenied},
		{"nested write txn with a read token", func(c context.Context) error {
			_, err := kvc.Txn(c, writeTxn)
			return err
		}, withToken("r"), rpctypes.ErrGRPCPermissionDenied},
		{"lease grant with a read token", func(c context.Context) error {
			_, err := lc.LeaseGrant(c, &pb.LeaseGrantRequest{TTL: 10})
			return err
		}, withToken("r"), rpctypes.ErrGRPCPermissionDenied},
		{"range without a token", func(c context.Context) error {
			_, err := kvc.Range(c, &pb.RangeRequest{Key: []byte("k")})
			return err
		}, ctx, rpctypes.ErrGRPCUserEmpty},
		{"range with a read token", func(c context.Context) error {
			_, err := kvc.Range(c, &pb.RangeRequest{Key: []byte("k")})
			return err
		}, withToken("r"), nil},
		{"read-only txn with a read token", func(c context.Context) error {
			_, err := kvc.Txn(c, readTxn)
			return err
		}, withToken("r"), nil},
		{"range with a bearer header", func(c context.Context) error {
			_, err := kvc.Range(c, &pb.RangeRequest{Key: []byte("k")})
			return err
		}, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer r"), nil},
		{"status without a token", func(c context.Context) error {
			_, err := mc.Status(c, &pb.StatusRequest{})
			return err
		}, ctx, nil},
		{"defragment with a write token", func(c context.Context) error {
			_, err := mc.Defragment(c, &pb.DefragmentRequest{})
			return err
		}, withToken("w"), rpctypes.ErrGRPCPermissionDenied},
		{"login with a wrong password", func(c context.Context) error {
			_, err := ac.Authenticate(c, &pb.AuthenticateRequest{Name: "cairn", Password: "nope"})
			return err
		}, ctx, rpctypes.ErrGRPCAuthFailed},
	} {
		err := tc.call(tc.ctx)
		if tc.want == nil && err != nil || tc.want != nil && !sameError(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := string(f.data["k"].Data); got != "v1" {
		t.Fatalf("k = %q after refused writes, want v1", got)
	}
	if u, fb := counters.Unauthenticated.Load(), counters.Forbidden.Load(); u != 4 || fb != 5 {
		t.Fatalf("counted %d unauthenticated and %d forbidden, want 4 and 5", u, fb)
	}
	// etcd's login: the token is the password; what it answers is the
	// token the client then sends, which writes with its role.
	lr, err := ac.Authenticate(ctx, &pb.AuthenticateRequest{Name: "anyone", Password: "w"})
	if err != nil || lr.Token != "w" {
		t.Fatalf("login with a write token: %v %v", lr, err)
	}
	if _, err := kvc.Put(withToken(lr.Token), &pb.PutRequest{Key: []byte("k"), Value: []byte("v2")}); err != nil {
		t.Fatalf("put with the login's token: %v", err)
	}
	if st, err := ac.AuthStatus(ctx, &pb.AuthStatusRequest{}); err != nil || !st.Enabled {
		t.Fatalf("auth status: %v %v, want enabled", st, err)
	}
}

// A watch stream needs a read token when it opens, and its token is
// checked again at each request on it: a token revoked meanwhile gets no
// new watch there.
func TestAuthWatchStream(t *testing.T) {
	roles := newRoles(map[string]auth.Role{"r": auth.RoleRead})
	conn, _, _ := authConn(t, roles)
	wc := pb.NewWatchClient(conn)
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}
	st, err := wc.Watch(ctx)
	if err == nil {
		_ = st.Send(create)
		_, err = st.Recv()
	}
	if !sameError(err, rpctypes.ErrGRPCUserEmpty) {
		t.Fatalf("watch without a token: %v, want %v", err, rpctypes.ErrGRPCUserEmpty)
	}
	st, err = wc.Watch(withToken("r"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(create); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || !r.Created {
		t.Fatalf("watch with a read token: %v %v", r, err)
	}
	// A check that cannot be made does not end a stream whose token was
	// good: its next watch is made.
	roles.setDown(true)
	if err := st.Send(create); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || !r.Created {
		t.Fatalf("a watch while tokens cannot be checked: %v %v, want created", r, err)
	}
	roles.setDown(false)
	roles.revoke("r")
	if err := st.Send(create); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := st.Recv()
		if err != nil {
			if !sameError(err, rpctypes.ErrGRPCInvalidAuthToken) {
				t.Fatalf("a new watch with a revoked token: %v, want %v", err, rpctypes.ErrGRPCInvalidAuthToken)
			}
			break
		}
		if r.Created {
			t.Fatalf("a revoked token made a watch: %v", r)
		}
	}
}

// Without Auth, etcd's login answers that authentication is off, and
// calls need no token.
func TestAuthOffAnswersNotEnabled(t *testing.T) {
	s, _ := newTestServer(t)
	conn := serveConn(t, s)
	if _, err := pb.NewAuthClient(conn).Authenticate(ctx, &pb.AuthenticateRequest{Name: "a", Password: "b"}); !sameError(err, rpctypes.ErrGRPCAuthNotEnabled) {
		t.Fatalf("login with auth off: %v, want %v", err, rpctypes.ErrGRPCAuthNotEnabled)
	}
	if _, err := pb.NewKVClient(conn).Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("put without a token, auth off: %v", err)
	}
}
