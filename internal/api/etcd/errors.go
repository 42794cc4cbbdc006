package etcdapi

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// grpcError maps a coordinator error to the gRPC status an etcd client
// understands (etcd's own error texts where one fits, so clientv3 turns
// them into its typed errors).
func grpcError(err error) error {
	switch {
	case err == nil:
		return nil
	case isStatus(err):
		return err // already an answer for the client
	case errors.Is(err, kv.ErrTimeout), errors.Is(err, kv.ErrAckTimeout), errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, kv.ErrNoLeader):
		// etcd's answer when it has no leader: clientv3 retries a Range
		// on another endpoint, and reports a Put, DeleteRange or Txn as
		// failed with an unknown outcome (as a timeout).
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, kv.ErrOverloaded):
		return rpctypes.ErrGRPCRequestTooManyRequests
	case errors.Is(err, kv.ErrStopped), errors.Is(err, kv.ErrWrongShard):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, kv.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// notSupported answers a request Cairn cannot serve with the semantics
// etcd gives it; the message names the limitation.
func notSupported(what string) error {
	return status.Error(codes.FailedPrecondition, "cairn: "+what+" (see docs/etcd-api.md)")
}

// isStatus reports whether err is already a gRPC status (an answer
// made for the client, not a coordinator error).
func isStatus(err error) bool {
	_, ok := status.FromError(err)
	return ok
}
