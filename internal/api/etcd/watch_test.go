package etcdapi

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cairn-db/cairn/internal/kv"
)

// serveConn serves s on a loopback port and returns a connection to it
// (with opts added to the connection's); both end with the test.
func serveConn(t *testing.T, s *Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(func() { s.Stop(time.Second) })
	conn, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// watchClient serves s on a loopback port and opens a watch stream to it
// (with opts added to the connection's).
func watchClient(t *testing.T, s *Server, opts ...grpc.DialOption) pb.Watch_WatchClient {
	t.Helper()
	st, err := pb.NewWatchClient(serveConn(t, s, opts...)).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recv reads the stream's next response, failing after ten seconds.
func recv(t *testing.T, st pb.Watch_WatchClient) *pb.WatchResponse {
	t.Helper()
	type res struct {
		r   *pb.WatchResponse
		err error
	}
	ch := make(chan res, 1)
	go func() { r, err := st.Recv(); ch <- res{r, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("recv: %v", r.err)
		}
		return r.r
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response within 10 s")
	}
	return nil
}

func create(t *testing.T, st pb.Watch_WatchClient, cr *pb.WatchCreateRequest) *pb.WatchResponse {
	t.Helper()
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}); err != nil {
		t.Fatal(err)
	}
	return recv(t, st)
}

// evs describes a response's events: "PUT a=1@3 prev 1@2".
func evs(r *pb.WatchResponse) string {
	var out []string
	for _, e := range r.Events {
		s := fmt.Sprintf("%s %s=%s@%d", e.Type, e.Kv.Key, e.Kv.Value, e.Kv.ModRevision)
		if e.PrevKv != nil {
			s += fmt.Sprintf(" prev %s@%d", e.PrevKv.Value, e.PrevKv.ModRevision)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestWatchEventsProgressCancel(t *testing.T) {
	s, f := newTestServer(t)
	f.set("a", "0") // 1: before the watch, not reported
	st := watchClient(t, s)
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), PrevKv: true})
	if !c.Created || c.Canceled || c.Header.Revision != 1 {
		t.Fatalf("create: %v", c)
	}
	f.set("a", "1")                      // 2
	f.set("b", "x")                      // 3: another key
	f.set("a", "2")                      // 4
	f.Delete(ctx, []byte("a"), kvOpts()) // 5
	var got []string
	for len(got) < 3 {
		r := recv(t, st)
		if r.WatchId != c.WatchId || len(r.Events) == 0 {
			t.Fatalf("event response %v", r)
		}
		for _, e := range strings.Split(evs(r), ", ") {
			got = append(got, e)
		}
	}
	want := "PUT a=1@2 prev 0@1|PUT a=2@4 prev 1@2|DELETE a=@5 prev 2@4"
	if strings.Join(got, "|") != want {
		t.Fatalf("events %q, want %q", strings.Join(got, "|"), want)
	}
	// A progress request answers where the watch stands.
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, st); p.WatchId != c.WatchId || len(p.Events) != 0 || p.Header.Revision != 5 {
		t.Fatalf("progress: %v, want revision 5", p)
	}
	// Cancel: the answer, then nothing more of that watch.
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: c.WatchId}}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, st); !r.Canceled || r.WatchId != c.WatchId {
		t.Fatalf("cancel: %v", r)
	}
	f.set("a", "3")
	// A second watch on the stream, resuming from revision 4: exactly
	// the events from it on, with NODELETE filtering the delete.
	c2 := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 4, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}})
	if !c2.Created || c2.WatchId == c.WatchId {
		t.Fatalf("second create: %v", c2)
	}
	if r := recv(t, st); r.WatchId != c2.WatchId || evs(r) != "PUT a=2@4, PUT a=3@6" {
		t.Fatalf("resumed events: %q (%v)", evs(r), r)
	}
}

func kvOpts() kv.WriteOptions { return kv.WriteOptions{} }

func TestWatchRangeCompactedRefused(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("p/"), RangeEnd: []byte("p0"), StartRevision: 1})
	if !c.Created {
		t.Fatalf("create: %v", c)
	}
	f.set("p/1", "a")
	f.set("q", "b")
	f.set("p/2", "c")
	var got []string
	for len(got) < 2 {
		r := recv(t, st)
		for _, e := range r.Events {
			if e.Type != mvccpb.PUT {
				t.Fatalf("event %v", e)
			}
			got = append(got, string(e.Kv.Key))
		}
	}
	if strings.Join(got, ",") != "p/1,p/2" {
		t.Fatalf("range events %v, want p/1,p/2", got)
	}
	// A start at or below the floor: created, then canceled as
	// compacted, naming the oldest revision still served.
	f.mu.Lock()
	f.floor = 2
	f.mu.Unlock()
	c2 := create(t, st, &pb.WatchCreateRequest{Key: []byte("p/1"), StartRevision: 2})
	if !c2.Created {
		t.Fatalf("create below the floor: %v", c2)
	}
	if r := recv(t, st); r.WatchId != c2.WatchId || !r.Canceled || r.CompactRevision != 3 {
		t.Fatalf("compacted: %v, want canceled with compact revision 3", r)
	}
	// Bad requests are created and canceled at once, with a reason.
	for _, cr := range []*pb.WatchCreateRequest{{Key: []byte("k"), StartRevision: -1}} {
		if r := create(t, st, cr); !r.Created || !r.Canceled || r.WatchId != -1 || r.CancelReason == "" {
			t.Fatalf("create %v: %v, want refused", cr, r)
		}
	}
}

func TestWatchStreamEndsWithTheNode(t *testing.T) {
	s, _ := newTestServer(t)
	st := watchClient(t, s)
	if c := create(t, st, &pb.WatchCreateRequest{Key: []byte("a")}); !c.Created {
		t.Fatalf("create: %v", c)
	}
	stopped := make(chan struct{})
	go func() { s.Stop(time.Minute); close(stopped) }()
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		if code(err) != codes.Unavailable {
			t.Fatalf("stream of a stopping node: %v, want Unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an open watch holds the node's stop")
	}
	<-stopped
}

// An event whose previous value the history no longer has ends a watch
// with prev_kv as compacted at its revision, after the events before it;
// a watch without prev_kv reports it.
func TestWatchPrevMissingCompacts(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	f.set("k", "1")
	f.set("k", "2")
	f.set("k", "3")
	f.mu.Lock()
	f.history[1].PrevValue, f.history[1].PrevMissing = nil, true
	f.mu.Unlock()
	plain := create(t, st, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 1})
	if r := recv(t, st); r.WatchId != plain.WatchId || evs(r) != "PUT k=1@1, PUT k=2@2, PUT k=3@3" {
		t.Fatalf("watch without prev_kv: %v", r)
	}
	withPrev := create(t, st, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 1, PrevKv: true})
	if r := recv(t, st); r.WatchId != withPrev.WatchId || evs(r) != "PUT k=1@1" {
		t.Fatalf("watch with prev_kv, first response: %v, want the event before the missing one", r)
	}
	if r := recv(t, st); r.WatchId != withPrev.WatchId || !r.Canceled || r.CompactRevision != 3 {
		t.Fatalf("watch with prev_kv: %v, want canceled with compact revision 3", r)
	}
	// From the event after it: served, with its previous value.
	later := create(t, st, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 3, PrevKv: true})
	if r := recv(t, st); r.WatchId != later.WatchId || evs(r) != "PUT k=3@3 prev 2@2" {
		t.Fatalf("watch with prev_kv from 3: %v", r)
	}
}

// A watch on one key, from now, asked of a node that holds no replica of
// the key's shard ends the stream with Unavailable, as one from a
// revision does: clientv3 then opens a new stream, on another endpoint,
// and creates its watches there. A refusal ended the watch with an error,
// and while the client had other watches open on that stream every new
// watch of the key went to the same node and was refused again. A range
// watch is still refused: no node may hold every shard.
func TestWatchWithoutReplicaEndsTheStream(t *testing.T) {
	s, f := newTestServer(t)
	f.noReplica = map[uint64]bool{1: true}
	st := watchClient(t, s)
	if r := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("b")}); !r.Created || !r.Canceled || r.CancelReason == "" {
		t.Fatalf("range watch without a replica: %v, want refused", r)
	}
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if code(err) != codes.Unavailable {
		t.Fatalf("watch of a key without a replica: %v, %v; want the stream ended with Unavailable", r, err)
	}
}

// A create request is read as etcd reads it: an empty key is key 0x00,
// the smallest (so a range from "" covers every key below its end), and
// a range holding no key (range_end at or below key) is refused with
// etcd's reason, rather than served as a watch that never reports.
func TestWatchCreateRequestReadAsEtcd(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	for _, cr := range []*pb.WatchCreateRequest{{Key: []byte("b"), RangeEnd: []byte("a")}, {Key: []byte("b"), RangeEnd: []byte("b")}} {
		if r := create(t, st, cr); !r.Created || !r.Canceled || r.WatchId != -1 || r.CancelReason != "mvcc: watcher range is empty" {
			t.Fatalf("create %v: %v, want refused as an empty range", cr, r)
		}
	}
	below := create(t, st, &pb.WatchCreateRequest{RangeEnd: []byte("m")})
	if !below.Created || below.Canceled {
		t.Fatalf("create from the empty key: %v", below)
	}
	f.set("a", "1")
	f.set("z", "2")
	if r := recv(t, st); r.WatchId != below.WatchId || evs(r) != "PUT a=1@1" {
		t.Fatalf("watch of [\"\", m): %v", r)
	}
}

// A client that closes its side of the stream after its requests (as
// grpcurl does at the end of its input) still gets its watches' events
// until it cancels the call, as from etcd; the stream used to end at once.
func TestWatchStreamOutlivesTheClientsHalfClose(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("k")})
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the node reads the end of the requests
	f.set("k", "1")
	if r := recv(t, st); r.WatchId != c.WatchId || evs(r) != "PUT k=1@1" {
		t.Fatalf("after the client's half-close: %v", r)
	}
}

// A watch id the client chooses: refused while a watch of the stream has
// it (created and canceled with watch id -1, as etcd answers), free again
// once that watch is canceled; ids the node picks skip it.
func TestWatchClientChosenIDs(t *testing.T) {
	s, f := newTestServer(t)
	st := watchClient(t, s)
	if c := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), WatchId: 1}); !c.Created || c.Canceled || c.WatchId != 1 {
		t.Fatalf("create with id 1: %v", c)
	}
	if c := create(t, st, &pb.WatchCreateRequest{Key: []byte("b"), WatchId: 1}); !c.Created || !c.Canceled || c.WatchId != -1 || c.CancelReason == "" {
		t.Fatalf("second create with id 1: %v, want refused", c)
	}
	auto := create(t, st, &pb.WatchCreateRequest{Key: []byte("c")})
	if auto.WatchId == 1 || auto.Canceled {
		t.Fatalf("create with no id: %v", auto)
	}
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 1}}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, st); !r.Canceled || r.WatchId != 1 {
		t.Fatalf("cancel: %v", r)
	}
	if c := create(t, st, &pb.WatchCreateRequest{Key: []byte("b"), WatchId: 1}); !c.Created || c.Canceled || c.WatchId != 1 {
		t.Fatalf("create with id 1 after its cancel: %v", c)
	}
	f.set("a", "1")
	f.set("b", "2")
	if r := recv(t, st); r.WatchId != 1 || evs(r) != "PUT b=2@2" {
		t.Fatalf("events of the new watch 1: %v", r)
	}
}

// progress_notify: a notification every ProgressInterval, at the revision
// up to which the watch has sent every event (never below an event sent
// before it), with no events.
func TestWatchProgressNotify(t *testing.T) {
	f := newFake()
	s, err := New(f, Config{ClusterID: 7, MemberID: 1, ProgressInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st := watchClient(t, s)
	c := create(t, st, &pb.WatchCreateRequest{Key: []byte("k"), ProgressNotify: true})
	go func() {
		for i := range 50 {
			f.set("k", fmt.Sprint(i))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	last, progress := int64(0), 0
	for last < 50 || progress < 3 {
		r := recv(t, st)
		if r.WatchId != c.WatchId || r.Canceled {
			t.Fatalf("response %v", r)
		}
		if len(r.Events) == 0 {
			if r.Header.Revision < last {
				t.Fatalf("progress at %d after an event at %d", r.Header.Revision, last)
			}
			progress++
			continue
		}
		for _, e := range r.Events {
			if e.Kv.ModRevision != last+1 {
				t.Fatalf("event at %d after %d", e.Kv.ModRevision, last)
			}
			last = e.Kv.ModRevision
		}
	}
}

// A watcher keeps its key and range end for as long as it lives: one
// longer than any key can be (a key nothing can write, an end past every
// key's length) is refused as Put refuses the key, so a stream's watchers
// cannot hold gigabytes of keys (1024 watchers of 8 MiB keys).
func TestWatchKeyOverTheLimitRefused(t *testing.T) {
	s, _ := newTestServer(t)
	st := watchClient(t, s)
	long := make([]byte, s.cfg.MaxKeySize+2)
	long[0] = 'k'
	for _, cr := range []*pb.WatchCreateRequest{
		{Key: long},
		{Key: long, RangeEnd: []byte{0}},
		{Key: []byte("k"), RangeEnd: long},
	} {
		if r := create(t, st, cr); !r.Created || !r.Canceled || r.WatchId != -1 || !strings.Contains(r.CancelReason, "limit") {
			t.Fatalf("create with a key of %d bytes and an end of %d: %v, want refused naming the limit", len(cr.Key), len(cr.RangeEnd), r)
		}
	}
	// At the limit (an end one byte past it, as a prefix of the longest
	// key gives), it is served.
	at := long[:s.cfg.MaxKeySize]
	if r := create(t, st, &pb.WatchCreateRequest{Key: at, RangeEnd: long[:s.cfg.MaxKeySize+1]}); !r.Created || r.Canceled {
		t.Fatalf("create at the limit: %v", r)
	}
}

// A watch from a revision beyond its shard's current one answers start
// - 1 in its created and progress headers, not the shard's revision as
// etcd does: clientv3 resumes a broken watch from a progress header's
// revision + 1, and from the shard's revision it would report changes
// below the start the program asked for. start - 1 is where every event
// the watch reports has been sent (docs/etcd-api.md, Watch).
func TestWatchFromTheFutureAnswersItsStart(t *testing.T) {
	s, f := newTestServer(t)
	f.set("a", "1")
	f.mu.Lock()
	now := f.index
	f.mu.Unlock()
	start := int64(now + 3)
	st := watchClient(t, s)
	if r := create(t, st, &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: start}); !r.Created || r.Canceled || r.Header.Revision != start-1 {
		t.Fatalf("create from %d (shard at %d): %v, want created at %d", start, now, r, start-1)
	}
	f.set("a", "2") // now + 1: below the start, not reported
	if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, st); len(r.Events) != 0 || r.Header.Revision != start-1 {
		t.Fatalf("progress: %v, want no events at %d (a resume from it + 1 keeps the start)", r, start-1)
	}
	f.set("a", "3") // now + 2
	f.set("a", "4") // now + 3 = start
	if r := recv(t, st); evs(r) != fmt.Sprintf("PUT a=4@%d", start) {
		t.Fatalf("events: %s, want only the put at the start revision %d", evs(r), start)
	}
}
