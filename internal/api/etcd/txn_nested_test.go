package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
)

// A nested Txn (etcd 3.3 and later) is run: its compares choose its
// branch, evaluated as etcd evaluates them, on the key as it was before
// the Txn (not after the outer Txn's earlier operations), and its
// operations are answered in place and applied with the rest, in one
// write.
func TestNestedTxn(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", "x")
	writes := f.writes
	isX := []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)}
	// The outer put makes k "y"; the nested compare still sees "x", and
	// the nested read sees "y".
	resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: isX,
		Success: ops(opPut("k", "y"), opTxn(isX, ops(opGet("k")), nil))})
	if err != nil || !resp.Succeeded {
		t.Fatalf("txn with a nested read: %v %v", resp, err)
	}
	rev := f.now()
	nested := resp.Responses[1].GetResponseTxn()
	if nested == nil || !nested.Succeeded || len(nested.Responses) != 1 {
		t.Fatalf("nested answer %v, want it succeeded (compared on the key before the Txn) with one response", nested)
	}
	read := nested.Responses[0].GetResponseRange()
	if len(read.Kvs) != 1 || string(read.Kvs[0].Value) != "y" || read.Kvs[0].ModRevision != rev || read.Header.Revision != rev {
		t.Fatalf("nested read: %v, want y at %d (the outer put)", read, rev)
	}
	if nested.Header.Revision != rev || resp.Header.Revision != rev {
		t.Fatalf("headers: nested %v, outer %v; want revision %d", nested.Header, resp.Header, rev)
	}
	if string(f.data["k"].Data) != "y" || f.writes != writes+1 {
		t.Fatalf("stored %q after %d writes, want y after one", f.data["k"].Data, f.writes-writes)
	}

	// Three levels: the first nested compare fails, its failure holds a
	// Txn whose compare holds and which puts.
	resp, err = k.Txn(ctx, &pb.TxnRequest{Success: ops(opTxn(isX, ops(opPut("k", "a")),
		ops(opTxn([]*pb.Compare{cmpVersion("k", 0, pb.Compare_GREATER)}, ops(opPut("k", "b"), opGet("k")), nil))))})
	if err != nil || !resp.Succeeded {
		t.Fatalf("three levels: %v %v", resp, err)
	}
	rev = f.now()
	first := resp.Responses[0].GetResponseTxn()
	if first.Succeeded || len(first.Responses) != 1 {
		t.Fatalf("first nested: %v, want failed (k is y) with one response", first)
	}
	second := first.Responses[0].GetResponseTxn()
	if !second.Succeeded || len(second.Responses) != 2 || second.Responses[0].GetResponsePut().Header.Revision != rev {
		t.Fatalf("second nested: %v, want succeeded, its put at %d", second, rev)
	}
	if got := second.Responses[1].GetResponseRange().Kvs[0]; string(got.Value) != "b" || got.ModRevision != rev {
		t.Fatalf("read after the nested put: %v, want b at %d", got, rev)
	}
	if string(f.data["k"].Data) != "b" || f.data["k"].Version != uint64(rev) {
		t.Fatalf("stored %q at %d, want b at %d", f.data["k"].Data, f.data["k"].Version, rev)
	}

	// A nested Txn without compares or operations succeeds, as in etcd;
	// nothing is written.
	writes = f.writes
	resp, err = k.Txn(ctx, &pb.TxnRequest{Success: ops(opTxn(nil, nil, nil))})
	if err != nil || !resp.Succeeded || len(resp.Responses) != 1 || !resp.Responses[0].GetResponseTxn().Succeeded || f.writes != writes {
		t.Fatalf("empty nested txn: %v %v", resp, err)
	}
}

// A write slipping in between the Txn's read and its write makes it
// evaluate again, nested compares included: the branch taken is the one
// the key the write replaces chooses.
func TestNestedTxnReevaluatesAfterAConcurrentWrite(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", "x")
	f.beforeWrite = func(f *fakeBackend) { f.set("k", "other") }
	resp, err := k.Txn(ctx, &pb.TxnRequest{Success: ops(opTxn([]*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)},
		ops(opPut("k", "y")), ops(opGet("k"))))})
	if err != nil {
		t.Fatal(err)
	}
	nested := resp.Responses[0].GetResponseTxn()
	if nested.Succeeded || string(nested.Responses[0].GetResponseRange().Kvs[0].Value) != "other" || string(f.data["k"].Data) != "other" {
		t.Fatalf("nested txn after a concurrent write: %v, stored %q; want its failure branch and the other write kept", nested, f.data["k"].Data)
	}
}

// A nested Txn whose operations write a key an outer operation writes is
// refused as etcd refuses it (duplicate key), before anything runs.
func TestNestedTxnDuplicatingAnOuterWrite(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", "x")
	writes := f.writes
	for name, r := range map[string]*pb.TxnRequest{
		"outer put, nested put":    {Success: ops(opPut("k", "y"), opTxn(nil, ops(opPut("k", "z")), nil))},
		"outer delete, nested put": {Success: ops(opDel("k"), opTxn(nil, nil, ops(opPut("k", "z"))))},
		"outer put, nested delete": {Compare: []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)}, Success: ops(opTxn(nil, ops(opDel("k")), nil), opPut("k", "y"))},
	} {
		if _, err := k.Txn(ctx, r); err != rpctypes.ErrGRPCDuplicateKey {
			t.Errorf("%s: %v, want %v", name, err, rpctypes.ErrGRPCDuplicateKey)
		}
	}
	if f.writes != writes || string(f.data["k"].Data) != "x" {
		t.Fatalf("refused txns wrote: %d writes, k = %q", f.writes-writes, f.data["k"].Data)
	}
}

// A nested Txn is held to the outer one's limits: one key, the compares
// Cairn evaluates exactly, and the answer bound.
func TestNestedTxnLimits(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", string(make([]byte, 1<<20)))
	writes := f.writes
	for name, r := range map[string]*pb.TxnRequest{
		"another key":     {Success: ops(opGet("k"), opTxn(nil, ops(opPut("j", "1")), nil))},
		"another compare": {Success: ops(opTxn([]*pb.Compare{cmpValue("j", "1", pb.Compare_EQUAL)}, ops(opGet("k")), nil))},
		"version above 0": {Success: ops(opTxn([]*pb.Compare{cmpVersion("k", 2, pb.Compare_EQUAL)}, nil, nil))},
	} {
		if _, err := k.Txn(ctx, r); code(err) != codes.FailedPrecondition {
			t.Errorf("%s: %v, want FailedPrecondition", name, err)
		}
	}
	reads := make([]*pb.RequestOp, maxRangeBytes>>20+1)
	for i := range reads {
		reads[i] = opGet("k")
	}
	r := &pb.TxnRequest{Success: ops(opPut("k", "small")), Failure: ops(opTxn(nil, reads, nil))}
	r.Compare = []*pb.Compare{cmpVersion("k", 0, pb.Compare_EQUAL)} // fails: the failure branch reads
	if _, err := k.Txn(ctx, r); code(err) != codes.ResourceExhausted {
		t.Fatalf("nested reads of a 1 MiB value past the bound: %v, want ResourceExhausted", err)
	}
	if f.writes != writes {
		t.Fatalf("refused txns wrote %d times", f.writes-writes)
	}
}
