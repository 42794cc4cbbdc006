package etcdapi

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestKeyMappingKeepsOrderAndRoundTrips(t *testing.T) {
	keys := [][]byte{{0}, {0, 0}, {0, 1}, {0, 0xFE}, {0, 0xFF}, {0, 0xFF, 0}, {1}, []byte("a"), {0xFF}}
	for i, k := range keys {
		s := storedKey(k)
		if s[0] == 0 && (len(s) < 2 || s[1] != escapeMark) {
			t.Fatalf("etcd key %x stored at %x, inside Cairn's own records", k, s)
		}
		back, ok := etcdKey(s)
		if !ok || !bytes.Equal(back, k) {
			t.Fatalf("etcd key %x stored at %x reads back as %x (%v)", k, s, back, ok)
		}
		if i > 0 && bytes.Compare(storedKey(keys[i-1]), s) >= 0 {
			t.Fatalf("order lost: %x stored at %x, not below %x stored at %x", keys[i-1], storedKey(keys[i-1]), k, s)
		}
	}
	for _, own := range []string{"\x00sys/members", "\x00etcd-lease/\x00\x00\x00\x00\x00\x00\x00\x01", "\x00"} {
		if _, ok := etcdKey([]byte(own)); ok {
			t.Fatalf("Cairn's record %q shown as an etcd key", own)
		}
	}
}

// etcd keys beginning with 0x00 (etcd's benchmark tool writes them) are
// stored apart from Cairn's own records: a put never overwrites a record,
// and ranges and deletes over every key never show or touch one.
func TestKeysBeginningWithZeroAreUserKeys(t *testing.T) {
	s, f := newTestServer(t)
	k := &kvServer{s: s}
	f.set("\x00sys/members", "cairn's")
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("\x00sys/members"), Value: []byte("user's")}); err != nil {
		t.Fatalf("put of an etcd key beginning with 0x00: %v", err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte{0, 0, 0}, Value: []byte("zero")}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if got := string(f.data["\x00sys/members"].Data); got != "cairn's" {
		t.Fatalf("Cairn's record was overwritten: %q", got)
	}
	got, err := k.Range(ctx, &pb.RangeRequest{Key: []byte("\x00sys/members")})
	if err != nil || got.Count != 1 || string(got.Kvs[0].Value) != "user's" {
		t.Fatalf("get of the etcd key: %v %v, want user's", got, err)
	}
	// Every key: the two keys beginning with 0x00 first, in key order,
	// under their etcd keys; no record of Cairn's.
	all, err := k.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil || all.Count != 3 {
		t.Fatalf("range over every key: %v %v, want 3 keys", all, err)
	}
	want := [][]byte{{0, 0, 0}, []byte("\x00sys/members"), []byte("a")}
	for i, kv := range all.Kvs {
		if !bytes.Equal(kv.Key, want[i]) {
			t.Fatalf("key %d: %q, want %q", i, kv.Key, want[i])
		}
	}
	// A prefix range of 0x00 holds exactly the etcd keys beginning with it.
	pre, err := k.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{1}})
	if err != nil || pre.Count != 2 {
		t.Fatalf("range [0x00, 0x01): %v %v, want 2 keys", pre, err)
	}
	del, err := k.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil || del.Deleted != 3 {
		t.Fatalf("delete of every key: %v %v, want 3 deleted", del, err)
	}
	if got := string(f.data["\x00sys/members"].Data); got != "cairn's" {
		t.Fatalf("deleting every etcd key touched Cairn's record: %q", got)
	}
}

// A watch on an etcd key beginning with 0x00 sees its changes under the
// etcd key, and a watch on every key never sees Cairn's records change.
func TestWatchOfKeysBeginningWithZero(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	one := create(t, st, &pb.WatchCreateRequest{Key: []byte{0, 1}, StartRevision: 1})
	all := create(t, st, &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 1})
	if !one.Created || one.Canceled || !all.Created || all.Canceled {
		t.Fatalf("creates: %v / %v", one, all)
	}
	f.set("\x00sys/members", "cairn's")
	k := &kvServer{s: s}
	if _, err := k.Put(ctx, &pb.PutRequest{Key: []byte{0, 1}, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for len(seen) < 2 {
		r := recv(t, st)
		if len(r.Events) == 0 {
			continue
		}
		seen[r.WatchId] += evs(r)
	}
	if seen[one.WatchId] != "PUT \x00\x01=v@2" || seen[all.WatchId] != "PUT \x00\x01=v@2" {
		t.Fatalf("events: key watch %q, range watch %q; want the put of 0x00 0x01 only", seen[one.WatchId], seen[all.WatchId])
	}
}
