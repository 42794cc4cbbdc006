package storage

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"testing"
	"time"
)

func TestLogKeysSortByIndex(t *testing.T) {
	idx := []uint64{0, 1, 255, 256, 1 << 40, math.MaxUint64}
	var keys [][]byte
	for _, i := range idx {
		k := LogKey(7, i)
		got, err := LogIndex(k)
		if err != nil || got != i {
			t.Fatalf("LogIndex(LogKey(%d)) = %d, %v", i, got, err)
		}
		keys = append(keys, k)
	}
	if !sort.SliceIsSorted(keys, func(a, b int) bool { return bytes.Compare(keys[a], keys[b]) < 0 }) {
		t.Fatal("log keys do not sort by index")
	}
	if _, err := LogIndex(HardStateKey(7)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("hard state key decoded as log key: %v", err)
	}
}

func TestShardLocalSpansDisjoint(t *testing.T) {
	s1, e1 := ShardLocalSpan(1)
	s2, _ := ShardLocalSpan(2)
	for _, k := range [][]byte{HardStateKey(1), LogKey(1, math.MaxUint64), DedupKey(1, math.MaxUint64, math.MaxUint64), LegacyDedupPrefixes(1)[0], LegacyDedupPrefixes(1)[1], LegacyDedupPrefixes(1)[2]} {
		if bytes.Compare(k, s1) < 0 || bytes.Compare(k, e1) >= 0 {
			t.Fatalf("key %x outside shard 1 span", k)
		}
	}
	if bytes.Compare(e1, s2) > 0 {
		t.Fatal("shard spans overlap")
	}
}

func TestDedupKeysSortByBucket(t *testing.T) {
	// A bucket's groups lie between its start and the next bucket's, so
	// a range deletion of [start(0), start(b)) drops buckets below b only.
	for _, index := range []uint64{0, 1, math.MaxUint64} {
		k := DedupKey(3, 7, index)
		if bytes.Compare(k, DedupBucketStart(3, 7)) < 0 || bytes.Compare(k, DedupBucketStart(3, 8)) >= 0 {
			t.Fatalf("group %x of bucket 7 outside its bucket's range", k)
		}
		b, got, err := DecodeDedupKey(k)
		if err != nil || b != 7 || got != index {
			t.Fatalf("decode %x: %d %d %v", k, b, got, err)
		}
	}
	p := DedupPrefix(3)
	if k := DedupKey(3, math.MaxUint64, math.MaxUint64); bytes.Compare(k, PrefixEnd(p)) >= 0 {
		t.Fatal("last bucket outside the dedup prefix")
	}
	for _, k := range [][]byte{LogKey(3, 1), DedupBucketStart(3, 1), LegacyDedupPrefixes(3)[0]} {
		if _, _, err := DecodeDedupKey(k); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x decoded as dedup key: %v", k, err)
		}
	}
	for _, l := range LegacyDedupPrefixes(3) {
		if bytes.HasPrefix(DedupKey(3, 1, 1), l) {
			t.Fatalf("dedup key under legacy prefix %x", l)
		}
	}
}

func TestDataKeysInsideTheirTokenSpan(t *testing.T) {
	start, end := DataSpan(100, 200)
	for _, c := range []struct {
		tok    uint64
		inside bool
	}{{99, false}, {100, true}, {199, true}, {200, false}} {
		k := DataKey(c.tok, []byte("\xff\xffkey"))
		in := bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
		if in != c.inside {
			t.Fatalf("token %d: inside=%v want %v", c.tok, in, c.inside)
		}
		tok, uk, err := DecodeDataKey(k)
		if err != nil || tok != c.tok || string(uk) != "\xff\xffkey" {
			t.Fatalf("decode: %d %q %v", tok, uk, err)
		}
	}
	// The last shard (end 0 = 2^64) covers the largest token.
	s, e := DataSpan(1<<63, 0)
	k := DataKey(math.MaxUint64, []byte("z"))
	if bytes.Compare(k, s) < 0 || bytes.Compare(k, e) >= 0 {
		t.Fatal("max token outside last span")
	}
	// Data keys never fall in the local (raft) key space.
	_, lastLocal := ShardLocalSpan(math.MaxUint64)
	if bytes.Compare(DataKey(0, nil), lastLocal) < 0 {
		t.Fatal("smallest data key sorts inside the local key space")
	}
	if bytes.Compare(MetaKey("\xff\xff"), LogKey(0, 0)) >= 0 {
		t.Fatal("meta keys overlap the local key space")
	}
}

func TestValueEncoding(t *testing.T) {
	v, d, err := DecodeValue(EncodeValue(42, []byte("hello")))
	if err != nil || v != 42 || string(d) != "hello" {
		t.Fatalf("got %d %q %v", v, d, err)
	}
	if _, _, err := DecodeValue([]byte{1, 2}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short value: %v", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := map[string]string{"a": "b", "a\xff": "b", "\x01\xff\xff": "\x02"}
	for in, want := range cases {
		if got := string(PrefixEnd([]byte(in))); got != want {
			t.Errorf("PrefixEnd(%q) = %q want %q", in, got, want)
		}
	}
	if PrefixEnd([]byte{0xff}) != nil {
		t.Error("all-0xff prefix has no end")
	}
}

func TestEngineBatchAndSnapshot(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	b := e.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	b.Set([]byte("b"), []byte("2"))
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	// Pebble wakes the committer before it records the fsync in its
	// histogram, so the count may trail the commit by a moment.
	deadline := time.Now().Add(10 * time.Second)
	for e.WALFsyncs() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("a synced commit left %d WAL fsyncs counted", e.WALFsyncs())
		}
		time.Sleep(time.Millisecond)
	}
	snap := e.NewSnapshot()
	defer snap.Close()
	b = e.NewIndexedBatch()
	b.Delete([]byte("a"))
	if _, err := b.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("indexed batch does not see its delete: %v", err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key still there: %v", err)
	}
	if v, err := snap.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("snapshot lost its view: %q %v", v, err)
	}
	if st := e.Stats(); st.Syncs != 1 || st.Commits != 2 {
		t.Fatalf("stats %+v", st)
	}
}
