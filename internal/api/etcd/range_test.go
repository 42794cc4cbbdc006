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
