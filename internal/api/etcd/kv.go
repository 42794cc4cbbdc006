package etcdapi

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// maxCASAttempts bounds the read-then-conditional-write loops (Put with
// prev_kv or ignore_value, DeleteRange with prev_kv, Txn) when other
// writes to the key keep coming first.
const maxCASAttempts = 16

type kvServer struct {
	pb.UnimplementedKVServer
	s *Server
}

// checkKey validates a request key.
func (s *Server) checkKey(key []byte) error {
	if len(key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if len(key) > s.cfg.MaxKeySize {
		return status.Errorf(codes.InvalidArgument, "cairn: key of %d bytes, over the %d-byte limit", len(key), s.cfg.MaxKeySize)
	}
	return nil
}

// current reads key linearizably; ok is false when it is absent (v then
// holds only the read's Revision).
func (s *Server) current(ctx context.Context, key []byte) (v kv.Value, ok bool, err error) {
	v, err = s.b.Get(ctx, key, kv.ReadOptions{Consistency: kv.Linearizable})
	if errors.Is(err, kv.ErrNotFound) {
		return kv.Value{Revision: v.Revision}, false, nil
	}
	return v, err == nil, err
}

// keyValue is the etcd form of a stored value (see the package doc for
// what create_revision and version report).
func keyValue(key []byte, v kv.Value, keysOnly bool) *mvccpb.KeyValue {
	out := &mvccpb.KeyValue{Key: key, ModRevision: int64(v.Version), CreateRevision: int64(v.Version), Version: 1, Lease: leaseOf(v)}
	if !keysOnly {
		out.Value = v.Data
	}
	return out
}

// ifUnchanged is the write condition that holds only while the key is as
// read: at version v.Version, or still absent.
func ifUnchanged(v kv.Value, exists bool) kv.WriteOptions {
	if exists {
		return kv.WriteOptions{Cond: kv.CondIfMatch, Version: v.Version}
	}
	return kv.WriteOptions{Cond: kv.CondIfAbsent}
}

// sortDefined reports whether r's sort order and target are ones etcd
// defines (etcd refuses others with "invalid sort option").
func sortDefined(r *pb.RangeRequest) bool {
	_, order := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]
	_, target := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]
	return order && target
}

func (k *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	s := k.s
	switch {
	case len(r.Key) == 0:
		return nil, rpctypes.ErrGRPCEmptyKey
	case r.Revision > 0:
		return nil, notSupported("reads at a past revision: Cairn keeps no history")
	case r.Revision < 0 || r.Limit < 0:
		return nil, status.Error(codes.InvalidArgument, "cairn: negative revision or limit")
	case !sortDefined(r):
		return nil, rpctypes.ErrGRPCInvalidSortOption
	}
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	if len(r.RangeEnd) > 0 {
		return s.rangeMany(ctx, r)
	}
	if err := s.checkKey(r.Key); err != nil {
		return nil, err
	}
	cons := kv.Linearizable
	if r.Serializable {
		cons = kv.Serializable
	}
	v, err := s.b.Get(ctx, r.Key, kv.ReadOptions{Consistency: cons})
	// The header's revision is the shard's applied index at the read,
	// when the answering node told it: a watch of the key from it + 1
	// misses no later change, found or not (get-then-watch, as clientv3's
	// locks do).
	if errors.Is(err, kv.ErrNotFound) {
		return &pb.RangeResponse{Header: s.header(v.Revision)}, nil
	}
	if err != nil {
		return nil, grpcError(err)
	}
	// count is before the revision filters, as for a range.
	resp := &pb.RangeResponse{Header: s.header(max(v.Version, v.Revision)), Count: 1}
	if !revisionFilters(r, int64(v.Version)) {
		return resp, nil
	}
	if !r.CountOnly {
		resp.Kvs = []*mvccpb.KeyValue{keyValue(r.Key, v, r.KeysOnly)}
	}
	return resp, nil
}

// revisionFilters reports whether a key at mod (and create) revision rev
// passes the request's min/max revision filters (0: no filter).
func revisionFilters(r *pb.RangeRequest, rev int64) bool {
	in := func(lo, hi int64) bool { return (lo == 0 || rev >= lo) && (hi == 0 || rev <= hi) }
	return in(r.MinModRevision, r.MaxModRevision) && in(r.MinCreateRevision, r.MaxCreateRevision)
}

func (k *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	s := k.s
	if err := s.checkKey(r.Key); err != nil {
		return nil, err
	}
	if len(r.Value) > s.cfg.MaxValueSize {
		return nil, rpctypes.ErrGRPCRequestTooLarge
	}
	if r.IgnoreLease && r.Lease != 0 {
		return nil, rpctypes.ErrGRPCLeaseProvided
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return nil, rpctypes.ErrGRPCValueProvided
	}
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	return s.put(ctx, r)
}

// put is Put of a checked request; with a lease, the key is attached to
// it (writeAttached).
func (s *Server) put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if !r.PrevKv && !r.IgnoreValue && !r.IgnoreLease {
		ver, err := s.writeAttached(ctx, r.Key, r.Value, r.Lease, kv.WriteOptions{})
		if err != nil {
			return nil, grpcError(err)
		}
		return &pb.PutResponse{Header: s.header(ver)}, nil
	}
	// prev_kv, ignore_value and ignore_lease need the value the write
	// replaces: read it, then write on condition that it is still there.
	for range maxCASAttempts {
		cur, exists, err := s.current(ctx, r.Key)
		if err != nil {
			return nil, grpcError(err)
		}
		if (r.IgnoreValue || r.IgnoreLease) && !exists {
			return nil, rpctypes.ErrGRPCKeyNotFound
		}
		value, lease := r.Value, r.Lease
		if r.IgnoreValue {
			value = cur.Data
		}
		if r.IgnoreLease {
			lease = leaseOf(cur)
		}
		ver, err := s.writeAttached(ctx, r.Key, value, lease, ifUnchanged(cur, exists))
		if errors.Is(err, kv.ErrPreconditionFailed) {
			continue // another write came first: read again
		}
		if err != nil {
			return nil, grpcError(err)
		}
		resp := &pb.PutResponse{Header: s.header(ver)}
		if r.PrevKv && exists {
			resp.PrevKv = keyValue(r.Key, cur, false)
		}
		return resp, nil
	}
	return nil, contended(r.Key)
}

func (k *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	s := k.s
	if len(r.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	if len(r.RangeEnd) > 0 {
		return s.deleteMany(ctx, r)
	}
	if err := s.checkKey(r.Key); err != nil {
		return nil, err
	}
	// An absent key answers the revision at which it was found absent
	// (as a one-key Range does): the no-op delete's own log index, or
	// with prev_kv the read's applied index.
	if !r.PrevKv {
		ver, err := s.b.Delete(ctx, r.Key, kv.WriteOptions{})
		if errors.Is(err, kv.ErrNotFound) {
			return &pb.DeleteRangeResponse{Header: s.header(ver)}, nil
		}
		if err != nil {
			return nil, grpcError(err)
		}
		return &pb.DeleteRangeResponse{Header: s.header(ver), Deleted: 1}, nil
	}
	for range maxCASAttempts {
		cur, exists, err := s.current(ctx, r.Key)
		if err != nil {
			return nil, grpcError(err)
		}
		if !exists {
			return &pb.DeleteRangeResponse{Header: s.header(cur.Revision)}, nil
		}
		ver, err := s.b.Delete(ctx, r.Key, ifUnchanged(cur, true))
		if errors.Is(err, kv.ErrPreconditionFailed) || errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, grpcError(err)
		}
		return &pb.DeleteRangeResponse{Header: s.header(ver), Deleted: 1, PrevKvs: []*mvccpb.KeyValue{keyValue(r.Key, cur, false)}}, nil
	}
	return nil, contended(r.Key)
}

// Compact is accepted and does nothing: Cairn keeps no history to compact.
func (k *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return &pb.CompactionResponse{Header: k.s.header(uint64(max(r.Revision, 0)))}, nil
}

// contended is the answer when other writes to key kept coming first.
func contended(key []byte) error {
	return status.Error(codes.Aborted, fmt.Sprintf("cairn: key %q kept changing during the request; retry", key))
}
