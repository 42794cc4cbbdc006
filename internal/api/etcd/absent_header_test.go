package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A one-key DeleteRange of an absent key answers a revision at least its
// shard's position when it found the key absent (with prev_kv: the read's
// applied index; without: the no-op delete's own log index), never 0:
// a watch of the key from it + 1 misses no later change.
func TestDeleteOfAbsentKeyAnswersItsRevision(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("other", "1")
	top := f.set("other", "2")
	for _, prevKv := range []bool{false, true} {
		del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("absent"), PrevKv: prevKv})
		if err != nil || del.Deleted != 0 || del.Header.Revision < int64(top) {
			t.Fatalf("prev_kv %v: delete of an absent key after a write at %d: %v %v, want 0 deleted at revision %d or above", prevKv, top, del, err, top)
		}
		later := f.set("absent", "x")
		if int64(later) <= del.Header.Revision {
			t.Fatalf("prev_kv %v: a later write of the key at %d is not above the delete's revision %d", prevKv, later, del.Header.Revision)
		}
		if _, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("absent")}); err != nil {
			t.Fatal(err)
		}
		top = f.set("other", "3")
	}
}

// A one-key Txn that reads or deletes an absent key answers the read's
// revision (the shard's applied index), in its header and in each
// operation's, never 0.
func TestTxnOnAbsentKeyAnswersTheReadsRevision(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("other", "1")
	top := int64(f.set("other", "2"))
	cases := map[string]*pb.TxnRequest{
		"get":                {Success: []*pb.RequestOp{opGet("absent")}},
		"delete":             {Success: []*pb.RequestOp{opDel("absent")}},
		"guarded delete":     {Compare: []*pb.Compare{cmpVersion("absent", 0, pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opDel("absent"), opGet("absent")}},
		"failed compare":     {Compare: []*pb.Compare{cmpValue("absent", "x", pb.Compare_EQUAL)}, Success: []*pb.RequestOp{opPut("absent", "y")}, Failure: []*pb.RequestOp{opGet("absent")}},
		"compare, no branch": {Compare: []*pb.Compare{cmpVersion("absent", 0, pb.Compare_GREATER)}},
	}
	for name, r := range cases {
		resp, err := k.Txn(ctx, r)
		if err != nil || resp.Header.Revision < top {
			t.Errorf("%s: %v %v, want header revision %d or above", name, resp, err, top)
			continue
		}
		for i, op := range resp.Responses {
			var h *pb.ResponseHeader
			switch o := op.Response.(type) {
			case *pb.ResponseOp_ResponseRange:
				h = o.ResponseRange.Header
			case *pb.ResponseOp_ResponseDeleteRange:
				h = o.ResponseDeleteRange.Header
			}
			if h == nil || h.Revision < top {
				t.Errorf("%s: operation %d answered header %v, want revision %d or above", name, i, h, top)
			}
		}
	}
	if _, ok := f.data["absent"]; ok {
		t.Fatal("a txn wrote the absent key")
	}
}
