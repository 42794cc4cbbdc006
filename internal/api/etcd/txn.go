package etcdapi

import (
	"bytes"
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/cairn-db/cairn/internal/kv"
)

// Txn runs a transaction whose compares and operations, nested Txns'
// included, all name one key (see the package doc): read the key,
// evaluate every compare on it as read (as etcd evaluates a Txn's
// compares, nested ones too, before any operation), answer the chosen
// operations, and make the one write that leaves the key as they leave
// it, on condition that the key is still as read when the answer
// depends on it; start again from the read when it is not.
func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	s := k.s
	key, err := s.checkTxn(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.withDeadline(ctx)
	defer cancel()
	if key == nil {
		// No key anywhere: no compare, and at most nested Txns as empty
		// as this one. It succeeds, as in etcd, at the revision a Range
		// over every key finding none answers (etcd's answer is its
		// current revision).
		t := &txnRun{s: s, readRev: s.emptyRevision(ctx, nil, []byte{0})}
		return t.txn(r)
	}
	for range maxCASAttempts {
		cur, exists, err := s.current(ctx, key)
		if err != nil {
			return nil, grpcError(err)
		}
		t := newTxnRun(s, key, cur, exists)
		resp, err := t.txn(r)
		if err != nil {
			return nil, err // before anything is written
		}
		err = t.commit(ctx)
		if errors.Is(err, kv.ErrPreconditionFailed) {
			continue // the key changed since the read: evaluate again
		}
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
	return nil, contended(key)
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
