package etcdapi

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// A key put with a lease carries the lease's id as a secondary-index term
// of its own: leaseIndex = id, stored with the value (so a read of the key
// tells its lease at no extra cost, and a put without a lease drops it,
// as etcd's does). Keys without a lease carry no term, and their puts
// are unchanged. The index entry also lists a lease's keys in id order
// (GET /v1/index/etcd-lease_int/… over HTTP).
const leaseIndex = wire.EtcdLeaseIndex

// leaseTerms are the index terms of a put with lease id (none for 0).
func leaseTerms(id int64) []wire.IndexTerm {
	if id == 0 {
		return nil
	}
	return []wire.IndexTerm{{Name: leaseIndex, Term: wire.EncodeIntTerm(id)}}
}

// leaseOf is the lease a stored value was put with (0: none).
func leaseOf(v kv.Value) int64 { return leaseIn(v.Index) }

// leaseIn is the lease an object's index terms name (0: none).
func leaseIn(terms []wire.IndexTerm) int64 {
	for _, t := range terms {
		if t.Name == leaseIndex {
			if id, err := wire.DecodeIntTerm(t.Term); err == nil {
				return id
			}
		}
	}
	return 0
}

// writeAttached puts value under key with opts (its condition) and, for
// lease != 0, attached to that lease: the lease's record names the key
// first (at version 0: the put in flight), then the put (carrying the
// lease's term), then the record takes the put's version. So a lease that
// expires at any point deletes the key, unless rewritten since; a lease
// gone before the last step gets the key deleted again and answers
// LeaseNotFound. A put whose condition fails did not happen: the record
// gets back what it listed of the key before, unless another put with
// the lease has attached the key since (undoInFlight). (After any other
// error the put may have happened: the key stays listed at version 0,
// which the lease's end deletes whatever its version.) Errors: the
// coordinator's, unmapped (kv.ErrPreconditionFailed for a failed
// condition), or gRPC statuses.
func (s *Server) writeAttached(ctx context.Context, key, value []byte, lease int64, opts kv.WriteOptions) (uint64, error) {
	if lease == 0 {
		ver, _, err := s.b.Put(ctx, key, value, opts)
		return ver, err
	}
	prev, listed, err := s.attachPrev(ctx, lease, key, 0)
	if err != nil {
		return 0, err
	}
	opts.Index = leaseTerms(lease)
	ver, _, err := s.b.Put(ctx, key, value, opts)
	if err != nil {
		if errors.Is(err, kv.ErrPreconditionFailed) {
			_ = s.undoInFlight(ctx, lease, key, prev, listed) // best effort, as below
		}
		return 0, err
	}
	if err := s.attach(ctx, lease, key, ver); err != nil {
		if errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
			_, _ = s.b.Delete(ctx, key, kv.WriteOptions{Cond: kv.CondIfMatch, Version: ver})
		}
		return 0, err
	}
	return ver, nil
}
