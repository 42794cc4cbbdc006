package etcdapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
)

func cmpValue(key, value string, r pb.Compare_CompareResult) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: r, TargetUnion: &pb.Compare_Value{Value: []byte(value)}}
}

func cmpMod(key string, rev int64, r pb.Compare_CompareResult) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: r, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

func cmpVersion(key string, v int64, r pb.Compare_CompareResult) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VERSION, Result: r, TargetUnion: &pb.Compare_Version{Version: v}}
}

func opPut(key, value string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}}
}

func opGet(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(key)}}}
}

func opDel(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}}
}

func TestTxnCompareAndSwap(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	rev := f.set("k", "x")
	cases := []struct {
		name    string
		cmp     []*pb.Compare
		success bool
	}{
		{"value equal", []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)}, true},
		{"value not equal", []*pb.Compare{cmpValue("k", "x", pb.Compare_NOT_EQUAL)}, false},
		{"value greater", []*pb.Compare{cmpValue("k", "w", pb.Compare_GREATER)}, true},
		{"value less", []*pb.Compare{cmpValue("k", "w", pb.Compare_LESS)}, false},
		{"mod equal", []*pb.Compare{cmpMod("k", int64(rev), pb.Compare_EQUAL)}, true},
		{"mod less", []*pb.Compare{cmpMod("k", int64(rev), pb.Compare_LESS)}, false},
		{"exists", []*pb.Compare{cmpVersion("k", 0, pb.Compare_GREATER)}, true},
		{"absent", []*pb.Compare{cmpVersion("k", 0, pb.Compare_EQUAL)}, false},
		{"both", []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL), cmpMod("k", int64(rev)+1, pb.Compare_EQUAL)}, false},
	}
	for _, c := range cases {
		before := f.data["k"]
		resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: c.cmp, Success: []*pb.RequestOp{opGet("k")}, Failure: []*pb.RequestOp{opGet("k")}})
		if err != nil || resp.Succeeded != c.success || len(resp.Responses) != 1 {
			t.Errorf("%s: %v %v, want succeeded=%v", c.name, resp, err, c.success)
		}
		if now := f.data["k"]; now.Version != before.Version || string(now.Data) != string(before.Data) {
			t.Errorf("%s: a read-only txn changed the key", c.name)
		}
	}
	// A CAS: put y if the value is x, else read.
	resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)},
		Success: []*pb.RequestOp{opPut("k", "y"), opGet("k")}, Failure: []*pb.RequestOp{opGet("k")}})
	if err != nil || !resp.Succeeded || string(f.data["k"].Data) != "y" {
		t.Fatalf("cas: %v %v, stored %q", resp, err, f.data["k"].Data)
	}
	if rr := resp.Responses[1].GetResponseRange(); string(rr.Kvs[0].Value) != "y" {
		t.Fatalf("a read after the txn's put should see it: %v", rr)
	}
	// The same CAS again fails and writes nothing.
	writes := f.writes
	resp, err = k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opPut("k", "z")}})
	if err != nil || resp.Succeeded || f.writes != writes || string(f.data["k"].Data) != "y" {
		t.Fatalf("failed cas: %v %v, stored %q", resp, err, f.data["k"].Data)
	}
}

// A write slipping in between the txn's read and its write must make the
// txn evaluate again, never apply a branch chosen on a stale value.
func TestTxnReevaluatesAfterAConcurrentWrite(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("k", "x")
	f.beforeWrite = func(f *fakeBackend) { f.set("k", "other") }
	resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpValue("k", "x", pb.Compare_EQUAL)},
		Success: []*pb.RequestOp{opPut("k", "y")}, Failure: []*pb.RequestOp{opGet("k")}})
	if err != nil || resp.Succeeded || string(f.data["k"].Data) != "other" {
		t.Fatalf("txn after a concurrent write: %v %v, stored %q; want the failure branch and the other write kept", resp, err, f.data["k"].Data)
	}
}

func TestTxnCreateIfAbsentAndDelete(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	create := &pb.TxnRequest{Compare: []*pb.Compare{cmpVersion("lock", 0, pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opPut("lock", "me")}}
	if resp, err := k.Txn(ctx, create); err != nil || !resp.Succeeded {
		t.Fatalf("create if absent: %v %v", resp, err)
	}
	if resp, err := k.Txn(ctx, create); err != nil || resp.Succeeded {
		t.Fatalf("second create if absent: %v %v, want failure", resp, err)
	}
	resp, err := k.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{cmpValue("lock", "me", pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opDel("lock")}})
	if err != nil || !resp.Succeeded || resp.Responses[0].GetResponseDeleteRange().Deleted != 1 {
		t.Fatalf("delete if mine: %v %v", resp, err)
	}
	if _, ok := f.data["lock"]; ok {
		t.Fatal("the lock is still there")
	}
}

func TestTxnLimitations(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	cases := map[string]*pb.TxnRequest{
		"two keys":           {Compare: []*pb.Compare{cmpValue("a", "x", pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opPut("b", "y")}},
		"two writes":         {Success: []*pb.RequestOp{opPut("a", "1"), opPut("a", "2")}},
		"version above 0":    {Compare: []*pb.Compare{cmpVersion("a", 3, pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opPut("a", "y")}},
		"compare on a range": {Compare: []*pb.Compare{{Key: []byte("a"), RangeEnd: []byte("b"), Target: pb.Compare_VALUE}}},
	}
	for name, r := range cases {
		_, err := k.Txn(ctx, r)
		if c := code(err); c != codes.FailedPrecondition && c != codes.InvalidArgument {
			t.Errorf("%s: %v, want FailedPrecondition or InvalidArgument", name, err)
		}
	}
	if f.writes != 0 {
		t.Fatalf("refused txns wrote %d times", f.writes)
	}
}

// A Txn without compares that reads its key and then writes it is atomic
// too: its read answers the value its write replaced, even when another
// write slips in between the read and the write.
func TestTxnReadThenWriteWithoutComparesIsAtomic(t *testing.T) {
	for _, write := range []*pb.RequestOp{opPut("k", "y"), opDel("k")} {
		s, f := newTestServer(t)
		k := &kvServer{s: s}
		f.set("k", "x")
		f.beforeWrite = func(f *fakeBackend) { f.set("k", "other") }
		resp, err := k.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{opGet("k"), write}})
		if err != nil {
			t.Fatal(err)
		}
		read := resp.Responses[0].GetResponseRange()
		if len(read.Kvs) != 1 || string(read.Kvs[0].Value) != "other" {
			t.Errorf("txn [get k, %v]: read %v, want the value its write replaced (other)", write, read.Kvs)
		}
	}
}

// A Txn's reads each answer the key's value: a small request that reads
// a large value many times must be refused as a Range past the same
// bound is, before its branch writes anything, rather than build an
// answer of any size.
func TestTxnAnswerIsBounded(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	big := string(make([]byte, 1<<20))
	f.set("k", big)
	reads := func(n int) []*pb.RequestOp {
		ops := make([]*pb.RequestOp, n)
		for i := range ops {
			ops[i] = opGet("k")
		}
		return ops
	}
	resp, err := k.Txn(ctx, &pb.TxnRequest{Success: reads(maxRangeBytes>>20 + 1)})
	if code(err) != codes.ResourceExhausted {
		t.Fatalf("%d reads of a 1 MiB value: %d responses, %v; want ResourceExhausted", maxRangeBytes>>20+1, len(resp.GetResponses()), err)
	}
	// Its write is not made either: the bound is checked first.
	writes := f.writes
	ops := append([]*pb.RequestOp{opPut("k", big)}, reads(maxRangeBytes>>20+1)...)
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: ops}); code(err) != codes.ResourceExhausted || f.writes != writes {
		t.Fatalf("a put then too many reads: %v, %d writes made; want ResourceExhausted and none", err, f.writes-writes)
	}
	// Under the bound, or keys only, it is answered.
	if resp, err := k.Txn(ctx, &pb.TxnRequest{Success: reads(8)}); err != nil || len(resp.Responses) != 8 {
		t.Fatalf("8 reads: %v %v", resp, err)
	}
	keysOnly := reads(maxRangeBytes>>20 + 1)
	for _, op := range keysOnly {
		op.GetRequestRange().KeysOnly = true
	}
	if _, err := k.Txn(ctx, &pb.TxnRequest{Success: keysOnly}); err != nil {
		t.Fatalf("keys-only reads: %v", err)
	}
}

// A Txn without compares or operations succeeds with no responses, as in
// etcd (clientv3's Txn(ctx).Commit()), where it was refused as not
// served. Its header revision is what a Range over every key finding
// none answers: the highest current revision of the shards, so a client
// that watches from it + 1 is not answered compacted. Nothing is written.
func TestEmptyTxnSucceeds(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	for i := range 3 {
		f.set(fmt.Sprintf("k/%d", i), "x")
	}
	f.mu.Lock()
	now, writes := f.index, f.writes
	f.mu.Unlock()
	resp, err := k.Txn(ctx, &pb.TxnRequest{})
	if err != nil {
		t.Fatalf("empty Txn: %v, want it to succeed", err)
	}
	if !resp.Succeeded || len(resp.Responses) != 0 {
		t.Errorf("empty Txn: succeeded %v with %d responses, want succeeded and none", resp.Succeeded, len(resp.Responses))
	}
	if h := resp.Header; h == nil || h.Revision != int64(now) || h.ClusterId != s.cfg.ClusterID || h.MemberId != s.cfg.MemberID {
		t.Errorf("empty Txn header %v, want revision %d of cluster %d member %d", h, now, s.cfg.ClusterID, s.cfg.MemberID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writes != writes || f.index != now {
		t.Errorf("empty Txn wrote: writes %d index %d, were %d and %d", f.writes, f.index, writes, now)
	}
}
