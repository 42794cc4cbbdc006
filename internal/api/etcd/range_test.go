package etcdapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func keysOf(r *pb.RangeResponse) string {
	var out []string
	for _, kv := range r.Kvs {
		out = append(out, string(kv.Key))
	}
	return fmt.Sprint(out)
}

func TestRangeOverSeveralKeys(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	for i := range 2500 { // more than one page of the coordinator
		f.set(fmt.Sprintf("p/%04d", i), fmt.Sprint(i))
	}
	f.set("q", "other")
	f.set("\x00sys/members", "cairn's own")

	prefix := []byte("p/")
	end := []byte("p0") // "p/" with its last byte + 1: etcd's prefix end
	all, err := k.Range(ctx, &pb.RangeRequest{Key: prefix, RangeEnd: end})
	if err != nil || all.Count != 2500 || len(all.Kvs) != 2500 || all.More || string(all.Kvs[2499].Value) != "2499" {
		t.Fatalf("prefix range: count %d, %d kvs, more %v, %v", all.Count, len(all.Kvs), all.More, err)
	}
	for i := 1; i < len(all.Kvs); i++ {
		if string(all.Kvs[i-1].Key) >= string(all.Kvs[i].Key) {
			t.Fatalf("keys out of order at %d: %s, %s", i, all.Kvs[i-1].Key, all.Kvs[i].Key)
		}
	}
	lim, err := k.Range(ctx, &pb.RangeRequest{Key: prefix, RangeEnd: end, Limit: 3})
	if err != nil || keysOf(lim) != "[p/0000 p/0001 p/0002]" || !lim.More || lim.Count != 2500 {
		t.Fatalf("limit 3: %s more %v count %d %v", keysOf(lim), lim.More, lim.Count, err)
	}
	desc, err := k.Range(ctx, &pb.RangeRequest{Key: prefix, RangeEnd: end, Limit: 2, SortOrder: pb.RangeRequest_DESCEND})
	if err != nil || keysOf(desc) != "[p/2499 p/2498]" {
		t.Fatalf("descending limit 2: %s %v", keysOf(desc), err)
	}
	cnt, err := k.Range(ctx, &pb.RangeRequest{Key: prefix, RangeEnd: end, CountOnly: true})
	if err != nil || cnt.Count != 2500 || len(cnt.Kvs) != 0 {
		t.Fatalf("count_only: %v %v", cnt.Count, err)
	}
	ko, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("p/0001"), RangeEnd: []byte("p/0003"), KeysOnly: true})
	if err != nil || keysOf(ko) != "[p/0001 p/0002]" || ko.Kvs[0].Value != nil {
		t.Fatalf("[p/0001, p/0003) keys only: %s %v", keysOf(ko), err)
	}
	// etcdctl get --prefix "": key 0x00, range_end 0x00 — everything but
	// Cairn's own records.
	every, err := k.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, KeysOnly: true})
	if err != nil || every.Count != 2501 || string(every.Kvs[2500].Key) != "q" {
		t.Fatalf("whole keyspace: count %d %v", every.Count, err)
	}
	from, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("p/2498"), RangeEnd: []byte{0}})
	if err != nil || keysOf(from) != "[p/2498 p/2499 q]" {
		t.Fatalf("--from-key p/2498: %s %v", keysOf(from), err)
	}
}

func TestDeleteRange(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	for i := range 5 {
		f.set(fmt.Sprintf("d/%d", i), fmt.Sprint("v", i))
	}
	f.set("e", "kept")
	resp, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("d/"), RangeEnd: []byte("d0"), PrevKv: true})
	if err != nil || resp.Deleted != 5 || len(resp.PrevKvs) != 5 || string(resp.PrevKvs[4].Value) != "v4" {
		t.Fatalf("delete prefix d/: %v %v", resp, err)
	}
	if len(f.data) != 1 || string(f.data["e"].Data) != "kept" {
		t.Fatalf("after deleting d/: %v", f.data)
	}
}

// DeleteRange over a range with prev_kv reports each deleted key's lease,
// as the one-key DeleteRange does (docs/etcd-api.md).
func TestDeleteRangePrevKvReportsLease(t *testing.T) {
	s, _ := newTestServer(t)
	l, k := &leaseServer{s: s}, &kvServer{s: s}
	g, err := l.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"p/a", "p/b"} {
		if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: g.ID}); err != nil {
			t.Fatal(err)
		}
	}
	one, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("p/a"), PrevKv: true})
	if err != nil || len(one.PrevKvs) != 1 || one.PrevKvs[0].Lease != g.ID {
		t.Fatalf("one-key delete: %v %v", one, err)
	}
	many, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("p/"), RangeEnd: []byte("p0"), PrevKv: true})
	if err != nil || len(many.PrevKvs) != 1 {
		t.Fatalf("range delete: %v %v", many, err)
	}
	if got := many.PrevKvs[0].Lease; got != g.ID {
		t.Fatalf("range delete's prev_kv of %q reports lease %d, want %d", many.PrevKvs[0].Key, got, g.ID)
	}
}

// Revision filters: count is before the filters (docs/etcd-api.md, as in
// etcd), for a range and a one-key Range alike, and more is only set when
// a limit cut the answer, not when the filters dropped keys.
func TestRangeFiltersCountAndMore(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("a", "1")
	rb := f.set("b", "2")
	many, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), MinModRevision: int64(rb)})
	if err != nil {
		t.Fatal(err)
	}
	one, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), MinModRevision: int64(rb)})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	if many.More {
		bad = append(bad, "range [a,c) without a limit, filtered to 1 of 2 keys, answers more=true")
	}
	if one.Count != 1 {
		bad = append(bad, "one-key Range of an existing key filtered out answers count 0 (the range path answers the count before filters)")
	}
	if len(bad) > 0 {
		t.Fatalf("%q\nrange: count %d kvs %d more %v; one key: count %d kvs %d", bad, many.Count, len(many.Kvs), many.More, one.Count, len(one.Kvs))
	}
}

// A keys_only range sorted by value is sorted by the values it then
// leaves out (as etcd does).
func TestKeysOnlySortByValue(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("a", "3")
	f.set("b", "1")
	f.set("c", "2")
	resp, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("d"), KeysOnly: true,
		SortTarget: pb.RangeRequest_VALUE, SortOrder: pb.RangeRequest_ASCEND})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, kv := range resp.Kvs {
		got += string(kv.Key)
	}
	if got != "bca" {
		t.Fatalf("keys_only range sorted by value ascending: %q, want %q (values a=3 b=1 c=2)", got, "bca")
	}
}
