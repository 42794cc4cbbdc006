package etcdapi

// Tokens on the etcd API, for a cluster started with --auth. The etcd
// API takes the HTTP API's bearer tokens (internal/api/auth), in the
// ways etcd's clients send credentials:
//
//   - etcd's login: Authenticate with any user name and a Cairn token as
//     the password answers that token as the call's auth token, which
//     clientv3 (Config.Username/Password) and etcdctl (--user
//     NAME:TOKEN) then send with every call as "token" metadata, as they
//     do with etcd;
//   - or the token sent directly, as "token" metadata or as
//     "authorization: Bearer TOKEN" (gRPC per-call credentials).
//
// Each call needs a role, as the HTTP routes do (requiredRole): reads
// (Range, a Txn of reads only, Watch, lease lookups, MemberList) read;
// writes (Put, DeleteRange, other Txns, Compact, lease grants, revokes
// and keep-alives) write; Status and Authenticate none; anything else
// admin. Refusals are etcd's errors, so etcd's clients act on them as
// with etcd: no token, ErrUserEmpty; an unknown or revoked one,
// ErrInvalidAuthToken (clientv3 logs in again and retries once); too low
// a role, ErrPermissionDenied. A stream (Watch, LeaseKeepAlive) is
// checked when it opens, at each request on it and every
// Config.StreamAuthInterval while it is open (auth_stream.go), so a
// revoked or expired token gets no new watch or keep-alive, and its
// open streams end with ErrInvalidAuthToken within about that interval
// (a check that cannot be made at the moment lets the stream go on: its
// token was good when it opened).

import (
	"context"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/api/auth"
)

// Authenticator checks a bearer token (*auth.Authenticator).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (auth.Role, error)
}

// requiredRole is the role a call of method (a gRPC full method name)
// needs; req is its request, for a unary call.
func requiredRole(method string, req any) auth.Role {
	switch method {
	case "/etcdserverpb.Auth/Authenticate", "/etcdserverpb.Auth/AuthStatus", "/etcdserverpb.Maintenance/Status":
		return auth.RoleNone
	case "/etcdserverpb.KV/Range", "/etcdserverpb.Watch/Watch",
		"/etcdserverpb.Lease/LeaseTimeToLive", "/etcdserverpb.Lease/LeaseLeases",
		"/etcdserverpb.Cluster/MemberList":
		return auth.RoleRead
	case "/etcdserverpb.Maintenance/Alarm":
		if r, ok := req.(*pb.AlarmRequest); ok && r.Action == pb.AlarmRequest_GET {
			return auth.RoleRead
		}
	case "/etcdserverpb.KV/Txn":
		if r, ok := req.(*pb.TxnRequest); ok && readsOnly(r) {
			return auth.RoleRead
		}
		return auth.RoleWrite
	case "/etcdserverpb.KV/Put", "/etcdserverpb.KV/DeleteRange", "/etcdserverpb.KV/Compact",
		"/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke", "/etcdserverpb.Lease/LeaseKeepAlive":
		return auth.RoleWrite
	}
	return auth.RoleAdmin
}

// readsOnly reports whether r (nested Txns included) only reads.
func readsOnly(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.GetRequest().(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if !readsOnly(o.RequestTxn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// tokenOf returns the token a call carries ("" if none).
func tokenOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(rpctypes.TokenFieldNameGRPC); len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	if v := md.Get("authorization"); len(v) > 0 {
		if scheme, tok, ok := strings.Cut(v[0], " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// authorize checks that the call of method in ctx carries a token of
// the role it needs.
func (s *Server) authorize(ctx context.Context, method string, req any) error {
	need := requiredRole(method, req)
	if need == auth.RoleNone {
		return nil
	}
	tok := tokenOf(ctx)
	if tok == "" {
		s.refused(false)
		return rpctypes.ErrGRPCUserEmpty
	}
	role, err := s.cfg.Auth.Authenticate(ctx, tok)
	switch {
	case auth.IsBadToken(err):
		s.refused(false)
		return rpctypes.ErrGRPCInvalidAuthToken
	case err != nil:
		return status.Error(codes.Unavailable, "etcdserver: the token could not be checked now; retry")
	case role < need:
		s.refused(true)
		return rpctypes.ErrGRPCPermissionDenied
	}
	return nil
}

// refused counts a refusal in Config.AuthCounters, if set.
func (s *Server) refused(forbidden bool) {
	c := s.cfg.AuthCounters
	switch {
	case c == nil:
	case forbidden:
		c.Forbidden.Add(1)
	default:
		c.Unauthenticated.Add(1)
	}
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := s.authorize(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if err := s.authorize(ss.Context(), info.FullMethod, nil); err != nil {
		return err
	}
	c := s.checkStream(ss.Context(), info.FullMethod)
	err := next(srv, checkedStream{ServerStream: ss, c: c})
	if refused := c.stop(); refused != nil {
		return refused // the handler saw its context end: say why
	}
	return err
}

// authServer is etcd's Auth service: the login of etcd's clients. Only
// Authenticate and AuthStatus are served; users and roles are Cairn's
// tokens, made with `cairn admin token create`, so etcd's user and role
// calls answer Unimplemented.
type authServer struct {
	pb.UnimplementedAuthServer
	s *Server
}

// Authenticate takes a Cairn token as the password (any user name) and
// answers it as the auth token etcd's clients then send.
func (a *authServer) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if a.s.cfg.Auth == nil {
		return nil, rpctypes.ErrGRPCAuthNotEnabled
	}
	role, err := a.s.cfg.Auth.Authenticate(ctx, r.Password)
	switch {
	case auth.IsBadToken(err):
		a.s.refused(false)
		return nil, rpctypes.ErrGRPCAuthFailed
	case err != nil:
		return nil, status.Error(codes.Unavailable, "etcdserver: the token could not be checked now; retry")
	case role < auth.RoleRead:
		a.s.refused(false)
		return nil, rpctypes.ErrGRPCAuthFailed
	}
	return &pb.AuthenticateResponse{Header: a.s.header(0), Token: r.Password}, nil
}

// AuthStatus tells whether the API checks tokens.
func (a *authServer) AuthStatus(context.Context, *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return &pb.AuthStatusResponse{Header: a.s.header(0), Enabled: a.s.cfg.Auth != nil}, nil
}
