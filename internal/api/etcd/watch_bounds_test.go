package etcdapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// A client that stops reading keeps a few pages of history on the node,
// however many watchers its stream has: a pump reads its next page only
// once it holds one of the stream's page slots, and keeps it until the
// page is sent. Before, each of the stream's pumps read a page (up to
// about 1 MiB) and held it while waiting to send: up to 1024 watchers ×
// every shard pages for one stream that never reads.
func TestWatchClientThatStopsReadingHoldsFewPages(t *testing.T) {
	s, f := newTestServer(t)
	// Fixed flow-control windows: the client takes 64 KiB of a stream and
	// no more until it reads.
	st := watchClient(t, s, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	const watchers = 40
	for range watchers {
		if c := create(t, st, &pb.WatchCreateRequest{Key: []byte("p/"), RangeEnd: []byte("p0")}); !c.Created || c.Canceled {
			t.Fatalf("create: %v", c)
		}
	}
	time.Sleep(100 * time.Millisecond) // the pumps' first reads
	// Ten changes of 100 KiB each, at once: a page of about 1 MiB for
	// every watcher, which the client does not read.
	f.mu.Lock()
	before := f.reads
	value := []byte(strings.Repeat("v", 100<<10))
	for i := range 10 {
		f.index++
		f.record(fmt.Appendf(nil, "p/%d", i), value, false)
	}
	f.mu.Unlock()
	time.Sleep(time.Second)
	f.mu.Lock()
	read := f.reads - before
	f.mu.Unlock()
	t.Logf("%d pages read for %d watchers while the client did not read", read, watchers)
	if read > 12 {
		t.Fatalf("%d pages read for %d watchers of a client that does not read, want a few", read, watchers)
	}
	// Once the client reads, every watcher gets its ten changes.
	got := map[int64]int{}
	for n := 0; n < watchers*10; {
		r := recv(t, st)
		got[r.WatchId] += len(r.Events)
		n += len(r.Events)
	}
	for id, n := range got {
		if n != 10 {
			t.Fatalf("watcher %d: %d events, want 10 (%v)", id, n, got)
		}
	}
	if len(got) != watchers {
		t.Fatalf("events for %d watchers, want %d", len(got), watchers)
	}
}
