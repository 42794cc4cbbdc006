package etcdapi

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
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

// A keys_only range leaves out the values, not the revisions: its
// min/max revision filters and its sorts by revision work on the keys'
// mod revisions (Cairn's listing carries no version with keys only).
func TestKeysOnlyRangeRevisionFiltersAndSort(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("b", "1")
	rc := f.set("c", "2")
	f.set("a", "3")
	keys := func(r *pb.RangeResponse) (out string) {
		for _, kv := range r.Kvs {
			out += string(kv.Key)
			if kv.Value != nil {
				out += "(value)"
			}
		}
		return out
	}
	cases := []struct {
		name string
		r    *pb.RangeRequest
		want string
	}{
		{"min_mod_revision", &pb.RangeRequest{MinModRevision: int64(rc)}, "ac"},
		{"max_mod_revision", &pb.RangeRequest{MaxModRevision: int64(rc)}, "bc"},
		{"min_create_revision", &pb.RangeRequest{MinCreateRevision: int64(rc)}, "ac"},
		{"sort by mod ascending", &pb.RangeRequest{SortTarget: pb.RangeRequest_MOD, SortOrder: pb.RangeRequest_ASCEND}, "bca"},
		{"sort by create descending", &pb.RangeRequest{SortTarget: pb.RangeRequest_CREATE, SortOrder: pb.RangeRequest_DESCEND}, "acb"},
	}
	for _, c := range cases {
		c.r.Key, c.r.RangeEnd, c.r.KeysOnly = []byte("a"), []byte("d"), true
		resp, err := k.Range(ctx, c.r)
		if err != nil || keys(resp) != c.want {
			t.Errorf("keys_only range with %s: %q %v, want %q", c.name, keys(resp), err, c.want)
		}
	}
}

// A limited range counts the keys past its limit without reading their
// values (docs/etcd-api.md): a client paging through a large prefix with
// a limit does not read the values of the whole rest of it at each page.
func TestLimitedRangeCountsWithoutValues(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	for i := range 5000 {
		f.set(fmt.Sprintf("p/%04d", i), "value")
	}
	f.valuesListed = 0
	resp, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("p/"), RangeEnd: []byte("p0"), Limit: 3})
	if err != nil || keysOf(resp) != "[p/0000 p/0001 p/0002]" || !resp.More || resp.Count != 5000 || string(resp.Kvs[2].Value) != "value" {
		t.Fatalf("limit 3: %s more %v count %d %v", keysOf(resp), resp.More, resp.Count, err)
	}
	if f.valuesListed > 1000 {
		t.Fatalf("a range with limit 3 over 5000 keys read %d values", f.valuesListed)
	}
}

// A Range or DeleteRange over several keys that finds none answers the
// shards' current revision, not 0: a client that lists an empty prefix
// and watches it from that revision + 1 (as etcd's clients do) gets a
// watch, where from 1 it would be answered compacted at every try.
func TestEmptyRangeAnswersCurrentRevision(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	for i := range 5 {
		f.set(fmt.Sprintf("other/%d", i), "x")
	}
	f.mu.Lock()
	now := f.index
	f.floor = now - 1 // the history before it is gone
	f.mu.Unlock()
	empty, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("none/"), RangeEnd: []byte("none0")})
	if err != nil || empty.Count != 0 || empty.Header.Revision != int64(now) {
		t.Fatalf("empty prefix range: count %d revision %d %v, want 0 keys at revision %d", empty.Count, empty.Header.Revision, err, now)
	}
	del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("none/"), RangeEnd: []byte("none0")})
	if err != nil || del.Deleted != 0 || del.Header.Revision != int64(now) {
		t.Fatalf("empty prefix delete: %d deleted at revision %d %v, want none at %d", del.Deleted, del.Header.Revision, err, now)
	}
	st := watchClient(t, s)
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("none/"), RangeEnd: []byte("none0"), StartRevision: empty.Header.Revision + 1}}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, st); !r.Created || r.Canceled || r.CompactRevision != 0 {
		t.Fatalf("watch from the empty range's revision + 1: %v, want created and not compacted", r)
	}
}

// A DeleteRange with prev_kv whose deleted values would pass the answer's
// bound is refused before it deletes anything; without prev_kv it
// deletes them all.
func TestDeleteRangePrevKVBoundedBeforeDeleting(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	big := string(make([]byte, 1<<20))
	n := maxRangeBytes>>20 + 1
	for i := range n {
		f.set(fmt.Sprintf("big/%03d", i), big)
	}
	writes := f.writes
	_, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("big/"), RangeEnd: []byte("big0"), PrevKv: true})
	if code(err) != codes.ResourceExhausted || f.writes != writes {
		t.Fatalf("prev_kv delete of %d MiB: %v, %d deletes made; want ResourceExhausted and none", n, err, f.writes-writes)
	}
	del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("big/"), RangeEnd: []byte("big0")})
	if err != nil || del.Deleted != int64(n) {
		t.Fatalf("delete without prev_kv: %v %v, want %d deleted", del, err, n)
	}
}
