package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Large user values go to blob files when the memtable flushes; small ones,
// every shard-local record (the Raft log) and the change history stay
// inline; all read back.
func TestValueSeparation(t *testing.T) {
	const n, size = 200, 4096
	for _, tc := range []struct {
		name    string
		minSize int
		blobs   bool
	}{{"on", 1024, true}, {"off", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Open(t.TempDir(), Options{ValueSeparation: tc.minSize})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// Random bytes: blob files are compressed, so repeated bytes
			// would shrink to nothing.
			value := func(i int, sz int) []byte {
				r := rand.New(rand.NewPCG(uint64(i), uint64(sz)))
				b := make([]byte, sz)
				for j := range b {
					b[j] = byte(r.Uint32())
				}
				return b
			}
			b := e.NewBatch()
			for i := range n {
				b.Set(DataKey(uint64(i)<<40, []byte(fmt.Sprint("big-", i))), EncodeValue(uint64(i+1), value(i, size)))
				b.Set(DataKey(uint64(i)<<40+1, []byte(fmt.Sprint("small-", i))), EncodeValue(uint64(i+1), value(i, 100)))
				b.Set(LogKey(1, uint64(i+1)), value(i, size))          // a Raft log entry
				b.Set(HistoryKey(1, uint64(i+1), 0), value(i+n, size)) // a history event
			}
			if err := b.Commit(true); err != nil {
				t.Fatal(err)
			}
			if err := e.db.Flush(); err != nil {
				t.Fatal(err)
			}
			w := e.WriteStats()
			if tc.blobs {
				// The big data values (n × size) are in blob files; the
				// log entries and history events (as many bytes again
				// each) are not.
				if w.BlobFiles == 0 || w.BlobBytes < n*size/2 || w.BlobBytes > n*size*3/2 {
					t.Fatalf("%d blob files of %d bytes; want the %d bytes of big values and not the log's or the history's", w.BlobFiles, w.BlobBytes, n*size)
				}
			} else if w.BlobFiles != 0 {
				t.Fatalf("%d blob files with value separation off", w.BlobFiles)
			}
			if w.Flushed == 0 || w.WAL == 0 {
				t.Fatalf("write stats %+v: want WAL and flushed bytes", w)
			}
			// One flush and no compaction: the blob file it wrote is
			// flushed bytes, not compacted ones too, and the flushed
			// bytes are the memtable's (no more than the WAL's), not the
			// WAL's bytes again.
			if w.Compacted != 0 || w.Flushed < w.BlobBytes || w.Flushed > w.WAL*11/10 {
				t.Fatalf("write stats %+v after one flush: want no compacted bytes and the memtable's bytes, blob files included, as flushed", w)
			}
			for i := range n {
				got, err := e.Get(DataKey(uint64(i)<<40, []byte(fmt.Sprint("big-", i))))
				if err != nil {
					t.Fatal(err)
				}
				if v, data, err := DecodeValue(got); err != nil || v != uint64(i+1) || !bytes.Equal(data, value(i, size)) {
					t.Fatalf("big-%d read back as version %d, %d bytes, %v", i, v, len(data), err)
				}
				if got, err := e.Get(LogKey(1, uint64(i+1))); err != nil || !bytes.Equal(got, value(i, size)) {
					t.Fatalf("log entry %d: %d bytes, %v", i+1, len(got), err)
				}
				if got, err := e.Get(HistoryKey(1, uint64(i+1), 0)); err != nil || !bytes.Equal(got, value(i+n, size)) {
					t.Fatalf("history event %d: %d bytes, %v", i+1, len(got), err)
				}
			}
		})
	}
}

// The span policy keeps exactly the short-lived spans inline and hands
// Pebble the key where each policy ends.
func TestInlineSpanPolicy(t *testing.T) {
	for _, tc := range []struct {
		key    []byte
		inline bool
		end    []byte
	}{
		{LogKey(7, 3), true, []byte{prefixData}},
		{DataKey(1, []byte("k")), false, []byte{prefixHistory}},
		{IndexKey("dob_int", []byte("x"), []byte("k")), false, []byte{prefixHistory}},
		{HistoryKey(2, 9, 0), true, []byte{prefixHistory + 1}},
		{[]byte{prefixHistory + 1}, false, nil},
	} {
		p, end, err := inlineSpanPolicy(tc.key)
		if err != nil || (p.ValueStoragePolicy == pebble.ValueStorageLowReadLatency) != tc.inline || !bytes.Equal(end, tc.end) {
			t.Errorf("key %x: policy %+v end %x err %v; want inline %v end %x", tc.key, p, end, err, tc.inline, tc.end)
		}
	}
}
