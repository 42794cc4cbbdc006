package etcdapi

import (
	"context"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var ctx = context.Background()

func code(err error) codes.Code { return status.Code(err) }

func TestPutRangeDelete(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	put, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	if err != nil || put.Header.Revision == 0 || put.Header.ClusterId != 7 || put.Header.MemberId != 1 {
		t.Fatalf("put: %v %v", put, err)
	}
	got, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	if err != nil || got.Count != 1 || string(got.Kvs[0].Value) != "1" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("range: %v %v, want a=1 at mod revision %d", got, err, put.Header.Revision)
	}
	if got, _ := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), KeysOnly: true}); got.Kvs[0].Value != nil {
		t.Fatalf("keys_only returned a value: %v", got)
	}
	if got, _ := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), CountOnly: true}); got.Count != 1 || len(got.Kvs) != 0 {
		t.Fatalf("count_only: %v", got)
	}
	// The filters drop the key from kvs; count is before them (etcd's).
	if got, _ := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), MinModRevision: put.Header.Revision + 1}); got.Count != 1 || len(got.Kvs) != 0 || got.More {
		t.Fatalf("min_mod_revision above the key's: %v, want count 1, no kvs, more false", got)
	}
	// prev_kv returns the replaced value.
	put2, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("2"), PrevKv: true})
	if err != nil || put2.PrevKv == nil || string(put2.PrevKv.Value) != "1" {
		t.Fatalf("put prev_kv: %v %v", put2, err)
	}
	// ignore_value keeps the value; on an absent key it is an error.
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), IgnoreValue: true}); err != nil || string(f.data["a"].Data) != "2" {
		t.Fatalf("ignore_value: %v, value %q", err, f.data["a"].Data)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("nope"), IgnoreValue: true}); code(err) != codes.InvalidArgument {
		t.Fatalf("ignore_value on an absent key: %v, want InvalidArgument (key not found)", err)
	}
	del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a"), PrevKv: true})
	if err != nil || del.Deleted != 1 || string(del.PrevKvs[0].Value) != "2" {
		t.Fatalf("delete prev_kv: %v %v", del, err)
	}
	if del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a")}); err != nil || del.Deleted != 0 {
		t.Fatalf("delete of an absent key: %v %v, want 0 deleted", del, err)
	}
	if got, _ := k.Range(ctx, &pb.RangeRequest{Key: []byte("a")}); got.Count != 0 {
		t.Fatalf("deleted key still read: %v", got)
	}
}

func TestPrevKvIsTheValueReplaced(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("a", "old")
	// Another client's write lands between the read and the write: the
	// put must not report "old" as the value it replaced.
	f.beforeWrite = func(f *fakeBackend) { f.set("a", "theirs") }
	put, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("mine"), PrevKv: true})
	if err != nil || string(put.PrevKv.Value) != "theirs" || string(f.data["a"].Data) != "mine" {
		t.Fatalf("put prev_kv under a concurrent write: %v %v, stored %q; want prev theirs, stored mine", put, err, f.data["a"].Data)
	}
}

func TestBadRequests(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	cases := map[string]func() error{
		"empty key": func() error { _, err := k.Put(ctx, &pb.PutRequest{Value: []byte("v")}); return err },
		"long key":  func() error { _, err := k.Put(ctx, &pb.PutRequest{Key: make([]byte, 5000)}); return err },
		"big value": func() error {
			_, err := k.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: make([]byte, 9<<20)})
			return err
		},
		"past revision":  func() error { _, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: 3}); return err },
		"negative limit": func() error { _, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Limit: -1}); return err },
		"empty range key": func() error {
			_, err := k.Range(ctx, &pb.RangeRequest{RangeEnd: []byte("b")})
			return err
		},
	}
	for name, call := range cases {
		err := call()
		if c := code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
			t.Errorf("%s: %v, want InvalidArgument or FailedPrecondition", name, err)
		}
	}
	if f.writes != 0 {
		t.Fatalf("bad requests wrote %d times", f.writes)
	}
	_, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: 3})
	if !strings.Contains(status.Convert(err).Message(), "docs/etcd-api.md") {
		t.Fatalf("a limitation's error should point to the docs: %v", err)
	}
}

func TestMemberListAndStatus(t *testing.T) {
	s, _ := newTestServer(t)
	ml, err := (&clusterServer{s: s}).MemberList(ctx, &pb.MemberListRequest{})
	if err != nil || len(ml.Members) != 2 || ml.Members[1].ID != 2 || ml.Members[1].ClientURLs[0] != "http://127.0.0.1:8181" ||
		ml.Members[0].PeerURLs[0] != "http://127.0.0.1:9080" {
		t.Fatalf("member list: %v %v", ml, err)
	}
	st, err := (&maintenanceServer{s: s}).Status(ctx, &pb.StatusRequest{})
	if err != nil || st.Leader != 2 || st.RaftTerm != 3 || st.RaftIndex != 41 || st.RaftAppliedIndex != 40 || st.Version == "" {
		t.Fatalf("status: %v %v", st, err)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(newFake(), Config{MemberID: 1}); err == nil {
		t.Fatal("New accepted a config without a cluster id")
	}
}

// A Put with ignore_value that also carries a value is refused ("value
// is provided", as etcd does) and changes nothing.
func TestPutIgnoreValueWithValueRefused(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("a", "old")
	_, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("new"), IgnoreValue: true})
	if err != rpctypes.ErrGRPCValueProvided {
		t.Fatalf("put with ignore_value and a value: err %v (stored %q), want %v", err, f.data["a"].Data, rpctypes.ErrGRPCValueProvided)
	}
}

// A one-key Range answers the shard's revision at the read, found or not:
// clientv3's get-then-watch (watch from the header's revision + 1, as its
// locks do) then starts after every change the read saw, never at 1.
func TestRangeHeaderIsTheReadsRevision(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("other", "1")
	top := f.set("other", "2")
	got, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("absent")})
	if err != nil || got.Count != 0 || got.Header.Revision != int64(top) {
		t.Fatalf("range of an absent key: %v %v, want header revision %d", got, err, top)
	}
	f.set("a", "1")
	top = f.set("other", "3")
	got, err = k.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	if err != nil || got.Count != 1 || got.Header.Revision != int64(top) || got.Kvs[0].ModRevision != int64(top-1) {
		t.Fatalf("range of a: %v %v, want header revision %d, mod revision %d", got, err, top, top-1)
	}
}

// A sort order or target etcd does not define is refused as etcd refuses
// it (InvalidArgument "invalid sort option"), in a Range and in a Txn's
// read, rather than answered unsorted.
func TestRangeBadSortOptionRefused(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("a", "1")
	f.set("b", "2")
	for _, r := range []*pb.RangeRequest{
		{Key: []byte("a"), RangeEnd: []byte{0}, SortTarget: 99},
		{Key: []byte("a"), RangeEnd: []byte{0}, SortOrder: 99},
		{Key: []byte("a"), RangeEnd: []byte{0}, SortOrder: -1},
		{Key: []byte("a"), SortTarget: -3},
	} {
		if resp, err := k.Range(ctx, r); err != rpctypes.ErrGRPCInvalidSortOption {
			t.Errorf("range sort target %d order %d: %v %v, want %v", r.SortTarget, r.SortOrder, resp, err, rpctypes.ErrGRPCInvalidSortOption)
		}
		txn := &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), SortTarget: r.SortTarget, SortOrder: r.SortOrder}}}}}
		if resp, err := k.Txn(ctx, txn); err != rpctypes.ErrGRPCInvalidSortOption {
			t.Errorf("txn read sort target %d order %d: %v %v, want %v", r.SortTarget, r.SortOrder, resp, err, rpctypes.ErrGRPCInvalidSortOption)
		}
	}
	if resp, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}, SortTarget: pb.RangeRequest_VALUE, SortOrder: pb.RangeRequest_DESCEND}); err != nil || len(resp.Kvs) != 2 || string(resp.Kvs[0].Key) != "b" {
		t.Fatalf("a defined sort: %v %v", resp, err)
	}
}
