package etcdapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
)

func opDelPrev(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key), PrevKv: true}}}
}

func opDelRange(key, end string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key), RangeEnd: []byte(end)}}}
}

// opTxn is a nested Txn.
func opTxn(cmp []*pb.Compare, success, failure []*pb.RequestOp) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Compare: cmp, Success: success, Failure: failure}}}
}

func ops(o ...*pb.RequestOp) []*pb.RequestOp { return o }

// now is the fake's last log index.
func (f *fakeBackend) now() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(f.index)
}

// events counts the changes of key in the history.
func (f *fakeBackend) events(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.history {
		if string(e.Key) == key {
			n++
		}
	}
	return n
}

// Two deletes of one key in a Txn are accepted, as in etcd: the first
// deletes it (prev_kv: the value deleted), the second finds nothing, and
// both answer the one write's revision; a read between them finds the
// key gone.
func TestTxnDeletesOneKeyTwice(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	old := f.set("k", "x")
	writes, evs := f.writes, f.events("k")
	resp, err := k.Txn(ctx, &pb.TxnRequest{Success: ops(opDelPrev("k"), opGet("k"), opDelPrev("k"))})
	if err != nil {
		t.Fatalf("txn [del k, get k, del k]: %v, want it run (etcd runs it)", err)
	}
	rev := f.now()
	if rev <= int64(old) || resp.Header.Revision != rev || !resp.Succeeded {
		t.Fatalf("header %v succeeded %v, want the delete's revision %d", resp.Header, resp.Succeeded, rev)
	}
	first, read, second := resp.Responses[0].GetResponseDeleteRange(), resp.Responses[1].GetResponseRange(), resp.Responses[2].GetResponseDeleteRange()
	if first.Deleted != 1 || len(first.PrevKvs) != 1 || string(first.PrevKvs[0].Value) != "x" || first.PrevKvs[0].ModRevision != int64(old) || first.Header.Revision != rev {
		t.Errorf("first delete: %v, want 1 deleted, prev x at %d, revision %d", first, old, rev)
	}
	if read.Count != 0 || len(read.Kvs) != 0 || read.Header.Revision != rev {
		t.Errorf("read between the deletes: %v, want none at revision %d", read, rev)
	}
	if second.Deleted != 0 || len(second.PrevKvs) != 0 || second.Header.Revision != rev {
		t.Errorf("second delete: %v, want 0 deleted at revision %d", second, rev)
	}
	if exists(f, "k") || f.writes != writes+1 || f.events("k") != evs+1 {
		t.Errorf("stored: k exists %v, %d writes and %d events of k made; want k gone by one write", exists(f, "k"), f.writes-writes, f.events("k")-evs)
	}

	// Of an absent key: nothing deleted, nothing written, the read's
	// revision.
	before := f.now()
	resp, err = k.Txn(ctx, &pb.TxnRequest{Success: ops(opDel("k"), opDel("k"))})
	if err != nil || resp.Header.Revision != before || f.now() != before {
		t.Fatalf("two deletes of an absent key: %v %v, log at %d; want revision %d and no write", resp, err, f.now(), before)
	}
	for i, r := range resp.Responses {
		if d := r.GetResponseDeleteRange(); d.Deleted != 0 || d.Header.Revision != before {
			t.Errorf("delete %d of an absent key: %v", i, d)
		}
	}

	// Guarded, with another write between the read and the delete: the
	// Txn evaluates again, and its prev_kv is the value it deleted.
	f.set("k", "x")
	f.beforeWrite = func(f *fakeBackend) { f.set("k", "other") }
	resp, err = k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpVersion("k", 0, pb.Compare_GREATER)}, Success: ops(opDelPrev("k"), opDelPrev("k"))})
	if err != nil || !resp.Succeeded {
		t.Fatalf("guarded deletes: %v %v", resp, err)
	}
	if d := resp.Responses[0].GetResponseDeleteRange(); d.Deleted != 1 || string(d.PrevKvs[0].Value) != "other" {
		t.Fatalf("guarded delete after another write: %v, want the value it deleted (other)", d)
	}
	if exists(f, "k") {
		t.Fatal("k survived")
	}
}

// etcd refuses a Txn that puts a key and deletes it, or puts it twice,
// with "duplicate key given in txn request", before anything runs; its
// rule (checkIntervals) spares a put and a delete only in two nested Txns
// of one list, the putting one first, and puts of one key in a nested
// Txn's success and failure. Cairn answers the same, also where it would
// refuse the request for its own reasons (ranges, several keys).
func TestTxnDuplicateKeyRule(t *testing.T) {
	then := func(o ...*pb.RequestOp) *pb.RequestOp { return opTxn(nil, o, nil) }
	els := func(o ...*pb.RequestOp) *pb.RequestOp { return opTxn(nil, nil, o) }
	refused := map[string]*pb.TxnRequest{
		"put, delete":                      {Success: ops(opPut("k", "1"), opDel("k"))},
		"delete, put":                      {Success: ops(opDel("k"), opPut("k", "1"))},
		"put twice":                        {Success: ops(opPut("k", "1"), opPut("k", "2"))},
		"in failure":                       {Failure: ops(opDel("k"), opPut("k", "1"))},
		"put, nested delete":               {Success: ops(opPut("k", "1"), then(opDel("k")))},
		"nested delete, put":               {Success: ops(then(opDel("k")), opPut("k", "1"))},
		"delete, nested put":               {Success: ops(opDel("k"), then(opPut("k", "1")))},
		"nested put, delete":               {Success: ops(then(opPut("k", "1")), opDel("k"))},
		"nested delete, nested put":        {Success: ops(then(opDel("k")), then(opPut("k", "1")))},
		"put, nested put":                  {Success: ops(opPut("k", "1"), then(opPut("k", "2")))},
		"nested put, nested put in else":   {Success: ops(then(opPut("k", "1")), els(opPut("k", "2")))},
		"put and delete inside a nested":   {Success: ops(then(then(opPut("k", "1"), opDel("k"))))},
		"deeper nested put under a delete": {Success: ops(opDel("k"), then(then(then(opPut("k", "1")))))},
		"range delete holding the put":     {Success: ops(opDelRange("a", "c"), opPut("b", "1"))},
		"several keys, one put twice":      {Success: ops(opPut("a", "1"), opPut("b", "1"), opPut("a", "2"))},
	}
	for name, r := range refused {
		s, f := newTestServer(t)
		k := &kvServer{s: s}
		f.set("k", "x")
		writes := f.writes
		if _, err := k.Txn(ctx, r); err != rpctypes.ErrGRPCDuplicateKey {
			t.Errorf("%s: %v, want etcd's %v", name, err, rpctypes.ErrGRPCDuplicateKey)
		}
		if f.writes != writes || string(f.data["k"].Data) != "x" {
			t.Errorf("%s: refused, yet wrote", name)
		}
	}
	accepted := map[string]*pb.TxnRequest{
		"deletes":                        {Success: ops(then(opDel("k")), els(opDel("k")), opDel("k"), opDel("k"))},
		"put in success, del in failure": {Success: ops(opPut("k", "1")), Failure: ops(opDel("k"))},
		"put in a nested success and failure": {Success: ops(opTxn([]*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)},
			ops(opPut("k", "1")), ops(opPut("k", "2"))))},
		"nested put, then nested delete":                 {Success: ops(then(opPut("k", "1")), then(opDel("k")))},
		"put in a nested success, delete in its failure": {Success: ops(opTxn(nil, ops(opPut("k", "1")), ops(opDel("k"))))},
	}
	for name, r := range accepted {
		s, f := newTestServer(t)
		k := &kvServer{s: s}
		f.set("k", "x")
		if _, err := k.Txn(ctx, r); err != nil {
			t.Errorf("%s: %v, want it run (etcd runs it)", name, err)
		}
	}
	// A range that holds no put, or a request on several keys without a
	// duplicate: etcd runs it, Cairn names its limitation.
	for name, r := range map[string]*pb.TxnRequest{
		"range beside the put":   {Success: ops(opDelRange("a", "b"), opPut("b", "1"))},
		"from-key beside a put":  {Success: ops(opDelRange("a", "\x00"), opPut("b", "1"))},
		"several keys, distinct": {Success: ops(opPut("a", "1"), opPut("b", "1"))},
	} {
		s, _ := newTestServer(t)
		if _, err := (&kvServer{s: s}).Txn(ctx, r); code(err) != codes.FailedPrecondition {
			t.Errorf("%s: %v, want FailedPrecondition", name, err)
		}
	}
}

// A put in a nested Txn that a later nested Txn deletes again: etcd runs
// both (a put, then a delete, at one revision). Cairn writes the state
// they leave, the key deleted, once; the answers show the put (a read
// between sees its value) and the delete of its value, all at the
// write's revision.
func TestTxnNestedPutThenNestedDelete(t *testing.T) {
	for _, existed := range []bool{true, false} {
		s, f := newTestServer(t)
		k := &kvServer{s: s}
		if existed {
			f.set("k", "x")
		}
		f.set("other", "1")
		writes := f.writes
		r := &pb.TxnRequest{Success: ops(opTxn(nil, ops(opPut("k", "y")), nil), opGet("k"), opTxn(nil, ops(opDelPrev("k")), nil))}
		resp, err := k.Txn(ctx, r)
		if err != nil {
			t.Fatalf("existed %v: %v", existed, err)
		}
		rev := f.now()
		put := resp.Responses[0].GetResponseTxn().Responses[0].GetResponsePut()
		read := resp.Responses[1].GetResponseRange()
		del := resp.Responses[2].GetResponseTxn().Responses[0].GetResponseDeleteRange()
		if put.Header.Revision != rev || resp.Header.Revision != rev {
			t.Errorf("existed %v: put answered at %d, txn at %d; want the write's revision %d", existed, put.Header.Revision, resp.Header.Revision, rev)
		}
		if len(read.Kvs) != 1 || string(read.Kvs[0].Value) != "y" || read.Kvs[0].ModRevision != rev {
			t.Errorf("existed %v: read after the put: %v, want y at %d", existed, read, rev)
		}
		if del.Deleted != 1 || len(del.PrevKvs) != 1 || string(del.PrevKvs[0].Value) != "y" || del.PrevKvs[0].ModRevision != rev || del.Header.Revision != rev {
			t.Errorf("existed %v: delete: %v, want y deleted at %d", existed, del, rev)
		}
		// One write: the delete (of an absent key, a no-op whose log
		// entry is the Txn's revision).
		want := writes
		if existed {
			want++
		}
		if exists(f, "k") || f.writes != want {
			t.Errorf("existed %v: k exists %v after %d writes, want gone after %d", existed, exists(f, "k"), f.writes-writes, want-writes)
		}
	}
}

// A nested Txn's put whose lease does not exist fails the Txn as in etcd
// (which checks every chosen put's lease first), even when a later nested
// Txn deletes the key again.
func TestTxnNestedPutWithUnknownLease(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", "x")
	writes := f.writes
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("y"), Lease: 999}}}
	_, err := k.Txn(ctx, &pb.TxnRequest{Success: ops(opTxn(nil, ops(put), nil), opTxn(nil, ops(opDel("k")), nil))})
	if err != rpctypes.ErrGRPCLeaseNotFound || f.writes != writes || string(f.data["k"].Data) != "x" {
		t.Fatalf("put with an unknown lease, then delete: %v, %d writes; want LeaseNotFound and none", err, f.writes-writes)
	}
}

// The check of a request on several keys (refused by Cairn whatever the
// check finds) has a bound on its work: past it, the request is refused
// naming the limitation without a verdict on its duplicates.
func TestTxnDuplicateCheckIsBounded(t *testing.T) {
	var r pb.TxnRequest
	for i := range 3000 {
		r.Success = append(r.Success, opDelRange(fmt.Sprintf("a%05d", i), fmt.Sprintf("a%05d\x00", i)), opPut(fmt.Sprintf("b%05d", i), "1"))
	}
	d := dupChecker{budget: maxDupCheckWork}
	if _, err := d.writes(r.Success); err != errDupCheckTooCostly {
		t.Fatalf("3000 range deletes and 3000 puts within the bound: %v, want %v", err, errDupCheckTooCostly)
	}
}

// A Txn has at most MaxTxnOps compares and operations in each list, as
// etcd's --max-txn-ops default; a nested Txn gets what its enclosing
// Txn's longest list leaves. Beyond, etcd's ErrGRPCTooManyOps, and
// nothing is written.
func TestTxnOperationBound(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	dels := func(n int) []*pb.RequestOp {
		var o []*pb.RequestOp
		for range n {
			o = append(o, opDel("k"))
		}
		return o
	}
	f.set("k", "x")
	writes := f.writes
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: dels(MaxTxnOps + 1)}); err != rpctypes.ErrGRPCTooManyOps || f.writes != writes {
		t.Fatalf("%d deletes: %v, %d writes; want TooManyOps and none", MaxTxnOps+1, err, f.writes-writes)
	}
	if _, err := k.Txn(ctx, &pb.TxnRequest{Failure: dels(MaxTxnOps + 1)}); err != rpctypes.ErrGRPCTooManyOps {
		t.Fatalf("%d deletes on failure: %v, want TooManyOps", MaxTxnOps+1, err)
	}
	// The outer list holds 100 operations: a nested Txn may hold 28.
	outer := append(dels(99), opTxn(nil, dels(MaxTxnOps-100+1), nil))
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: outer}); err != rpctypes.ErrGRPCTooManyOps || f.writes != writes {
		t.Fatalf("a nested Txn past its share: %v, %d writes; want TooManyOps and none", err, f.writes-writes)
	}
	outer = append(dels(99), opTxn(nil, dels(MaxTxnOps-100), nil))
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: outer}); err != nil {
		t.Fatalf("a nested Txn within its share: %v", err)
	}
	if _, ok := f.data["k"]; ok {
		t.Fatal("k still there after a Txn of deletes")
	}
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: dels(MaxTxnOps)}); err != nil {
		t.Fatalf("%d deletes: %v", MaxTxnOps, err)
	}
}
