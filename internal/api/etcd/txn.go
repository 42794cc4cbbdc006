package etcdapi

import (
	"bytes"
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// Txn runs a transaction whose compares and operations all name one key
// (see the package doc): read the key, evaluate the compares, run the
// chosen branch's write on condition that the key is still as read, and
// start again from the read when it is not.
func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	s := k.s
	key, err := s.txnKey(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	if key == nil {
		// Nothing to compare or run: it succeeds, as in etcd, at the
		// revision a Range over every key finding none answers (etcd's
		// answer is its current revision).
		return &pb.TxnResponse{Header: s.header(s.emptyRevision(ctx, nil, []byte{0})), Succeeded: true}, nil
	}
	for range maxCASAttempts {
		cur, exists, err := s.current(ctx, key)
		if err != nil {
			return nil, grpcError(err)
		}
		ok := true
		for _, c := range r.Compare {
			ok = ok && compareHolds(c, cur, exists)
		}
		ops := r.Success
		if !ok {
			ops = r.Failure
		}
		resp, err := s.runOps(ctx, key, ops, cur, exists, len(r.Compare) > 0)
		if errors.Is(err, kv.ErrPreconditionFailed) {
			continue // the key changed since the read: evaluate again
		}
		if err != nil {
			return nil, err
		}
		resp.Succeeded = ok
		return resp, nil
	}
	return nil, contended(key)
}

// txnKey checks that every compare and operation of r names the same
// single key, and returns it: nil for a Txn without compares or
// operations.
func (s *Server) txnKey(r *pb.TxnRequest) ([]byte, error) {
	var key []byte
	same := func(k, end []byte) error {
		if err := s.checkKey(k); err != nil {
			return err
		}
		if len(end) > 0 {
			return notSupported("a Txn over a range of keys is not served yet")
		}
		if key == nil {
			key = k
		} else if !bytes.Equal(key, k) {
			return notSupported("a Txn's compares and operations must all name one key")
		}
		return nil
	}
	for _, c := range r.Compare {
		if err := same(c.Key, c.RangeEnd); err != nil {
			return nil, err
		}
		if err := compareSupported(c); err != nil {
			return nil, err
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		writes := 0
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				if o.RequestRange.Revision != 0 {
					return nil, notSupported("reads at a past revision: Cairn keeps no history")
				}
				if !sortDefined(o.RequestRange) {
					return nil, rpctypes.ErrGRPCInvalidSortOption
				}
				if err := same(o.RequestRange.Key, o.RequestRange.RangeEnd); err != nil {
					return nil, err
				}
			case *pb.RequestOp_RequestPut:
				if o.RequestPut.Lease != 0 && o.RequestPut.IgnoreLease {
					return nil, rpctypes.ErrGRPCLeaseProvided
				}
				if o.RequestPut.IgnoreValue && len(o.RequestPut.Value) != 0 {
					return nil, rpctypes.ErrGRPCValueProvided
				}
				if len(o.RequestPut.Value) > s.cfg.MaxValueSize {
					return nil, rpctypes.ErrGRPCRequestTooLarge
				}
				if err := same(o.RequestPut.Key, nil); err != nil {
					return nil, err
				}
				writes++
			case *pb.RequestOp_RequestDeleteRange:
				if err := same(o.RequestDeleteRange.Key, o.RequestDeleteRange.RangeEnd); err != nil {
					return nil, err
				}
				writes++
			default:
				return nil, notSupported("nested Txns are not served")
			}
		}
		if writes > 1 {
			return nil, rpctypes.ErrGRPCDuplicateKey
		}
	}
	return key, nil // nil: no compare and no operation
}

// compareSupported accepts the compares Cairn evaluates exactly: value,
// mod_revision and lease any way, version and create_revision only
// against 0 (does the key exist).
func compareSupported(c *pb.Compare) error {
	switch c.Target {
	case pb.Compare_VALUE, pb.Compare_MOD, pb.Compare_LEASE:
		return nil
	case pb.Compare_VERSION:
		if c.GetVersion() == 0 {
			return nil
		}
	case pb.Compare_CREATE:
		if c.GetCreateRevision() == 0 {
			return nil
		}
	}
	return notSupported("Cairn records no creation revision or modification count: compare version or create_revision only with 0")
}

// compareHolds evaluates c against the key as read. An absent key has
// revisions, version and lease 0, and no value (a value compare fails),
// as in etcd.
func compareHolds(c *pb.Compare, cur kv.Value, exists bool) bool {
	var have, want int64
	switch c.Target {
	case pb.Compare_VALUE:
		if !exists {
			return false
		}
		return cmpResult(c.Result, bytes.Compare(cur.Data, c.GetValue()))
	case pb.Compare_MOD:
		want = c.GetModRevision()
		if exists {
			have = int64(cur.Version)
		}
	case pb.Compare_VERSION:
		want = c.GetVersion()
		if exists {
			have = 1
		}
	case pb.Compare_CREATE:
		want = c.GetCreateRevision()
		if exists {
			have = int64(cur.Version)
		}
	case pb.Compare_LEASE:
		want = c.GetLease()
		if exists {
			have = leaseOf(cur)
		}
	}
	switch {
	case have < want:
		return cmpResult(c.Result, -1)
	case have > want:
		return cmpResult(c.Result, 1)
	}
	return cmpResult(c.Result, 0)
}

func cmpResult(r pb.Compare_CompareResult, sign int) bool {
	switch r {
	case pb.Compare_EQUAL:
		return sign == 0
	case pb.Compare_NOT_EQUAL:
		return sign != 0
	case pb.Compare_GREATER:
		return sign > 0
	case pb.Compare_LESS:
		return sign < 0
	}
	return false
}

// runOps runs a branch on key, as read (cur, exists): its write, if any,
// on condition that the key is unchanged when guarded (or when the
// branch reported the key as read: a Range before the write, prev_kv,
// ignore_value, ignore_lease), and its reads
// answered from the state before or after the write, in order. Until the
// write, the revision answered is the read's, as for a one-key Range: the
// shard's applied index at the read (cur.Revision), found or not.
func (s *Server) runOps(ctx context.Context, key []byte, ops []*pb.RequestOp, cur kv.Value, exists, guarded bool) (*pb.TxnResponse, error) {
	if answerBytes(key, ops, cur, exists) > maxRangeBytes {
		return nil, errTxnTooLarge // before the branch writes anything
	}
	opts := kv.WriteOptions{}
	if guarded {
		opts = ifUnchanged(cur, exists)
	}
	resp := &pb.TxnResponse{}
	// read: a Range before the write answered the key as read, so the
	// write must replace that (as prev_kv's must).
	read := false
	rev := cur.Revision
	if exists {
		rev = max(cur.Version, cur.Revision)
	}
	for _, op := range ops {
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			rr := &pb.RangeResponse{Header: s.header(rev)}
			if exists {
				rr.Count = 1 // before the revision filters, as for Range
			}
			if exists && revisionFilters(o.RequestRange, int64(cur.Version)) {
				if !o.RequestRange.CountOnly {
					rr.Kvs = []*mvccpb.KeyValue{keyValue(key, cur, o.RequestRange.KeysOnly)}
				}
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}})
			read = true
		case *pb.RequestOp_RequestPut:
			p := o.RequestPut
			value, lease := p.Value, p.Lease
			if (p.IgnoreValue || p.IgnoreLease) && !exists {
				return nil, rpctypes.ErrGRPCKeyNotFound
			}
			if p.IgnoreValue {
				value = cur.Data
			}
			if p.IgnoreLease {
				lease = leaseOf(cur)
			}
			if !guarded && (read || p.PrevKv || p.IgnoreValue || p.IgnoreLease) {
				opts = ifUnchanged(cur, exists) // the previous value must be the one read
			}
			ver, err := s.writeAttached(ctx, key, value, lease, opts)
			if err != nil {
				return nil, passCond(err)
			}
			pr := &pb.PutResponse{Header: s.header(ver)}
			if o.RequestPut.PrevKv && exists {
				pr.PrevKv = keyValue(key, cur, false)
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: pr}})
			cur, exists, rev = kv.Value{Data: value, Version: ver, Index: leaseTerms(lease)}, true, ver
		case *pb.RequestOp_RequestDeleteRange:
			dr := &pb.DeleteRangeResponse{Header: s.header(rev)}
			if exists {
				if !guarded && (read || o.RequestDeleteRange.PrevKv) {
					opts = ifUnchanged(cur, exists)
				}
				ver, err := s.b.Delete(ctx, key, opts)
				switch {
				case errors.Is(err, kv.ErrNotFound):
					return nil, kv.ErrPreconditionFailed // deleted since the read: evaluate again
				case err != nil:
					return nil, passCond(err)
				}
				dr.Header, dr.Deleted = s.header(ver), 1
				if o.RequestDeleteRange.PrevKv {
					dr.PrevKvs = []*mvccpb.KeyValue{keyValue(key, cur, false)}
				}
				cur, exists, rev = kv.Value{}, false, ver
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}})
		}
	}
	resp.Header = s.header(rev)
	return resp, nil
}

// errTxnTooLarge answers a Txn whose reads would answer more than
// maxRangeBytes of keys and values (each read of the key answers its
// value again), as a Range past the bound is answered.
var errTxnTooLarge = status.Error(codes.ResourceExhausted,
	"cairn: the Txn's reads answer more than 64 MiB of keys and values; read the key fewer times or keys_only (see docs/etcd-api.md)")

// answerBytes is an upper bound of the keys and values the branch ops
// answers on key, as read (cur, exists): what its reads and prev_kv
// return, each seeing the branch's write before it (the revision
// filters, which may drop a read's value, are not applied).
func answerBytes(key []byte, ops []*pb.RequestOp, cur kv.Value, exists bool) int {
	size, value := 0, len(cur.Data)
	for _, op := range ops {
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			switch {
			case !exists || o.RequestRange.CountOnly:
			case o.RequestRange.KeysOnly:
				size += len(key)
			default:
				size += len(key) + value
			}
		case *pb.RequestOp_RequestPut:
			if o.RequestPut.PrevKv && exists {
				size += len(key) + value
			}
			if !o.RequestPut.IgnoreValue {
				value = len(o.RequestPut.Value)
			}
			exists = true
		case *pb.RequestOp_RequestDeleteRange:
			if o.RequestDeleteRange.PrevKv && exists {
				size += len(key) + value
			}
			exists = false
		}
	}
	return size
}

// passCond keeps kv.ErrPreconditionFailed (the caller evaluates the Txn
// again) and maps every other error for the client.
func passCond(err error) error {
	if errors.Is(err, kv.ErrPreconditionFailed) {
		return err
	}
	return grpcError(err)
}
