package etcdapi

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// txnRun is one evaluation of a checked Txn on its key as read: txn
// answers the chosen operations, nested Txns included, without writing;
// commit then makes the one write that leaves the key as they leave it
// and gives the answers its revision.
//
// One write is enough, and keeps the Txn all or nothing: on one key,
// etcd's duplicate-key rule (dupChecker.writes) lets a path of a Txn
// put the key at most once, and delete it only after that put (in a
// later nested Txn) or without any put. So the key ends up put (the put's
// value), deleted, or as read. etcd makes each of the Txn's puts and
// deletes at one revision; Cairn makes the last state's write, at the
// revision every write of the answer reports.
type txnRun struct {
	s   *Server
	key []byte
	// read, readExists: the key as read, on which every compare is
	// evaluated; readRev is the revision answered until the first write.
	read       kv.Value
	readExists bool
	readRev    uint64
	// cur, exists: the key as the operations so far leave it.
	cur    kv.Value
	exists bool
	// changed: an operation so far put the key or deleted it (found):
	// later answers are at the write's revision. put: one put it.
	changed, put bool
	// observed: the answer depends on the key as read (a compare, or a
	// read, prev_kv, ignore_value or ignore_lease before any write), so
	// the write is made on condition that the key is still as read.
	// deletedRead: a delete found the key as read, so the write must find
	// it too.
	observed, deletedRead bool
	// leases: the leases the chosen puts name; each must exist.
	leases []int64
	// size: the keys and values answered so far (at most maxRangeBytes).
	size int
	// fix: what sets the write's revision in the answers, once known.
	fix []func(rev int64)
}

func newTxnRun(s *Server, key []byte, cur kv.Value, exists bool) *txnRun {
	rev := cur.Revision
	if exists {
		rev = max(cur.Version, cur.Revision)
	}
	return &txnRun{s: s, key: key, read: cur, readExists: exists, readRev: rev, cur: cur, exists: exists}
}

// errTxnTooLarge answers a Txn whose reads would answer more than
// maxRangeBytes of keys and values (each read of the key answers its
// value again), as a Range past the bound is answered.
var errTxnTooLarge = status.Error(codes.ResourceExhausted,
	"cairn: the Txn's reads answer more than 64 MiB of keys and values; read the key fewer times or keys_only (see docs/etcd-api.md)")

// answer adds n bytes of keys and values to the answer, refusing the Txn
// past the bound (before anything is written).
func (t *txnRun) answer(n int) error {
	if t.size += n; t.size > maxRangeBytes {
		return errTxnTooLarge
	}
	return nil
}

// header is the header of an answer given now: at the revision read
// until the Txn writes, at the write's from then on.
func (t *txnRun) header() *pb.ResponseHeader {
	h := t.s.header(t.readRev)
	if t.changed {
		t.fix = append(t.fix, func(rev int64) { h.Revision = rev })
	}
	return h
}

// kv is the key as it is now, for an answer (with the write's revision
// when the Txn put it).
func (t *txnRun) kv(keysOnly bool) *mvccpb.KeyValue {
	out := keyValue(t.key, t.cur, keysOnly)
	if t.changed {
		t.fix = append(t.fix, func(rev int64) { out.ModRevision, out.CreateRevision = rev, rev })
	}
	return out
}

// txn evaluates r's compares on the key as read and answers the chosen
// operations in order.
func (t *txnRun) txn(r *pb.TxnRequest) (*pb.TxnResponse, error) {
	ok := true
	for _, c := range r.GetCompare() {
		ok = ok && compareHolds(c, t.read, t.readExists)
	}
	t.observed = t.observed || len(r.GetCompare()) > 0
	ops := r.GetSuccess()
	if !ok {
		ops = r.GetFailure()
	}
	resp := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, 0, len(ops))}
	for _, op := range ops {
		out, err := t.op(op)
		if err != nil {
			return nil, err
		}
		resp.Responses = append(resp.Responses, out)
	}
	resp.Header = t.header()
	return resp, nil
}

func (t *txnRun) op(op *pb.RequestOp) (*pb.ResponseOp, error) {
	switch o := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		rr, err := t.rangeOp(o.RequestRange)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}}, err
	case *pb.RequestOp_RequestPut:
		pr, err := t.putOp(o.RequestPut)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: pr}}, err
	case *pb.RequestOp_RequestDeleteRange:
		dr, err := t.deleteOp(o.RequestDeleteRange)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}}, err
	case *pb.RequestOp_RequestTxn:
		tr, err := t.txn(o.RequestTxn)
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: tr}}, err
	}
	panic("etcdapi: a checked Txn holds an empty operation")
}

func (t *txnRun) rangeOp(r *pb.RangeRequest) (*pb.RangeResponse, error) {
	t.observed = t.observed || !t.changed
	rr := &pb.RangeResponse{Header: t.header()}
	if !t.exists {
		return rr, nil
	}
	rr.Count = 1 // before the revision filters, as for Range
	if r.CountOnly {
		return rr, nil
	}
	if !t.changed && !revisionFilters(r, int64(t.cur.Version)) {
		return rr, nil
	}
	n := len(t.key)
	if !r.KeysOnly {
		n += len(t.cur.Data)
	}
	if err := t.answer(n); err != nil {
		return nil, err
	}
	rr.Kvs = []*mvccpb.KeyValue{t.kv(r.KeysOnly)}
	if t.changed {
		// The Txn's own put: filtered on the write's revision.
		t.fix = append(t.fix, func(rev int64) {
			if !revisionFilters(r, rev) {
				rr.Kvs = nil
			}
		})
	}
	return rr, nil
}

// putOp answers a put. The key is as read (a put comes before any other
// write of its key: dupChecker.writes), as etcd checks ignore_value and
// ignore_lease against the key before the Txn.
func (t *txnRun) putOp(p *pb.PutRequest) (*pb.PutResponse, error) {
	if (p.IgnoreValue || p.IgnoreLease) && !t.exists {
		return nil, rpctypes.ErrGRPCKeyNotFound
	}
	t.observed = t.observed || (!t.changed && (p.PrevKv || p.IgnoreValue || p.IgnoreLease))
	value, lease := p.Value, p.Lease
	if p.IgnoreValue {
		value = t.cur.Data
	}
	if p.IgnoreLease {
		lease = leaseOf(t.cur)
	}
	if p.Lease != 0 {
		t.leases = append(t.leases, p.Lease)
	}
	pr := &pb.PutResponse{}
	if p.PrevKv && t.exists {
		if err := t.answer(len(t.key) + len(t.cur.Data)); err != nil {
			return nil, err
		}
		pr.PrevKv = t.kv(false)
	}
	t.cur, t.exists = kv.Value{Data: value, Index: leaseTerms(lease)}, true
	t.changed, t.put = true, true
	pr.Header = t.header()
	return pr, nil
}

func (t *txnRun) deleteOp(d *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	dr := &pb.DeleteRangeResponse{}
	if t.exists {
		if !t.changed {
			t.deletedRead = true
			t.observed = t.observed || d.PrevKv
		}
		dr.Deleted = 1
		if d.PrevKv {
			if err := t.answer(len(t.key) + len(t.cur.Data)); err != nil {
				return nil, err
			}
			dr.PrevKvs = []*mvccpb.KeyValue{t.kv(false)}
		}
		t.cur, t.exists, t.changed = kv.Value{}, false, true
	}
	dr.Header = t.header()
	return dr, nil
}

// commit makes the write that leaves the key as the answered operations
// leave it (none if they wrote nothing), on condition that the key is
// still as read when the answer depends on it, and gives the answers
// its revision. kv.ErrPreconditionFailed: the key changed since the
// read, nothing was written; evaluate again.
func (t *txnRun) commit(ctx context.Context) error {
	if !t.changed {
		return nil // a read: every answer is at the read's revision
	}
	opts := kv.WriteOptions{}
	if t.observed {
		opts = ifUnchanged(t.read, t.readExists)
	}
	var ver uint64
	var err error
	if t.exists {
		ver, err = t.s.writeAttached(ctx, t.key, t.cur.Data, leaseOf(t.cur), opts)
		if err != nil {
			return passCond(err)
		}
	} else {
		// Deleted: a put deleted again by a later nested Txn still needs
		// its lease to exist, as etcd checks every put's before the Txn.
		for _, id := range t.leases {
			_, _, ok, err := t.s.readLease(ctx, id)
			if err != nil {
				return grpcError(err)
			}
			if !ok {
				return rpctypes.ErrGRPCLeaseNotFound
			}
		}
		ver, err = t.s.b.Delete(ctx, t.key, opts)
		switch {
		case errors.Is(err, kv.ErrNotFound) && t.deletedRead:
			return kv.ErrPreconditionFailed // deleted since the read: evaluate again
		case errors.Is(err, kv.ErrNotFound):
			// Put, then deleted: the key ends absent, as it is; the
			// no-op delete's log entry is the Txn's revision.
			ver = max(ver, t.readRev)
		case err != nil:
			return passCond(err)
		}
	}
	for _, f := range t.fix {
		f(int64(ver))
	}
	return nil
}

// passCond keeps kv.ErrPreconditionFailed (the caller evaluates the Txn
// again) and maps every other error for the client.
func passCond(err error) error {
	if errors.Is(err, kv.ErrPreconditionFailed) {
		return err
	}
	return grpcError(err)
}
