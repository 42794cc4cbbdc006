package etcdapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/kv"
)

// Watch serves etcd's watch streams from the shards' histories on this
// node (see docs/etcd-api.md). A watcher reads each shard it covers from
// this node's replica of it, in log order: one shard for a single key,
// every shard for a range, their streams merged as they come. Revisions
// are the shards' log indexes, so a single-key watch resumed from the
// last revision seen + 1 gets exactly the events after it, on any node.
//
// Threads: the handler serves the stream's requests, which one goroutine
// reads (it ends when the handler returns); one per shard of each watcher
// reads that shard's history and sends its events, one per watcher with
// progress_notify ticks: those end with the stream (or the watcher's
// cancellation), and the handler waits for them. Sends are serialised by
// the stream's mutex.

// watchPageBytes bounds the keys and values of one watch response (a
// log entry's events are never split, so one may be larger).
const watchPageBytes = 1 << 20

// maxWatchersPerStream bounds the watchers of one stream.
const maxWatchersPerStream = 1024

// watchPagesPerStream bounds the history pages a stream's watchers hold
// between reading and sending them (see step).
const watchPagesPerStream = 4

type watchServer struct {
	pb.UnimplementedWatchServer
	s *Server
}

// watchStream is one client stream and its watchers.
type watchStream struct {
	s      *Server
	stream pb.Watch_WatchServer
	ctx    context.Context
	fail   context.CancelCauseFunc // ends the stream with an error
	wg     sync.WaitGroup

	sendMu sync.Mutex
	// pages holds a slot for each page read and not yet sent.
	pages chan struct{}
	mu    struct {
		sync.Mutex
		watchers map[int64]*watcher
		nextID   int64
	}
}

// watcher is one watch of a stream.
type watcher struct {
	id                      int64
	key, end                []byte // end nil: key alone; "\x00": every key from key on
	prevKV, noPut, noDelete bool
	progress                bool
	ctx                     context.Context
	cancel                  context.CancelFunc
	wg                      sync.WaitGroup
	shards                  []uint64
	mu                      sync.Mutex
	rev                     map[uint64]uint64 // shard -> every event up to it has been sent
	compacted               bool
	split                   splitCheck // watch_split.go
}

func (w *watchServer) Watch(stream pb.Watch_WatchServer) error {
	ctx, fail := context.WithCancelCause(stream.Context())
	ws := &watchStream{s: w.s, stream: stream, ctx: ctx, fail: fail, pages: make(chan struct{}, watchPagesPerStream)}
	ws.mu.watchers = map[int64]*watcher{}
	defer ws.wg.Wait()
	defer fail(nil)
	reqs := make(chan *pb.WatchRequest)
	// The reader is not waited for: Recv returns once the handler has
	// returned (gRPC then ends the stream), and the reader with it. A
	// client that closes its side (io.EOF) has sent its last request:
	// its watches go on until it cancels the call, as in etcd.
	go func() {
		for {
			r, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				fail(err)
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case r := <-reqs:
			ws.handle(r)
		case <-w.s.done:
			fail(status.Error(codes.Unavailable, "cairn: node stopping"))
		case <-ctx.Done():
			err := context.Cause(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}

func (ws *watchStream) handle(r *pb.WatchRequest) {
	switch u := r.RequestUnion.(type) {
	case *pb.WatchRequest_CreateRequest:
		ws.create(u.CreateRequest)
	case *pb.WatchRequest_CancelRequest:
		ws.cancelWatch(u.CancelRequest.WatchId)
	case *pb.WatchRequest_ProgressRequest:
		ws.mu.Lock()
		all := make([]*watcher, 0, len(ws.mu.watchers))
		for _, w := range ws.mu.watchers {
			all = append(all, w)
		}
		ws.mu.Unlock()
		for _, w := range all {
			ws.sendProgress(w)
		}
	}
}

// send sends r; a failure ends the stream.
func (ws *watchStream) send(r *pb.WatchResponse) bool {
	ws.sendMu.Lock()
	defer ws.sendMu.Unlock()
	if ws.ctx.Err() != nil {
		return false
	}
	if err := ws.stream.Send(r); err != nil {
		ws.fail(err)
		return false
	}
	return true
}

// refuse answers a create request that cannot be served: created and
// canceled at once, with the reason (what etcd answers).
func (ws *watchStream) refuse(reason string) {
	ws.send(&pb.WatchResponse{Header: ws.s.header(0), WatchId: -1, Created: true, Canceled: true, CancelReason: reason})
}

func (ws *watchStream) create(cr *pb.WatchCreateRequest) {
	s := ws.s
	w := &watcher{key: cr.Key, prevKV: cr.PrevKv, progress: cr.ProgressNotify, rev: map[uint64]uint64{}}
	w.split.at = time.Now()
	if len(w.key) == 0 {
		w.key = []byte{0} // etcd's reading: the smallest key
	}
	switch {
	case cr.StartRevision < 0:
		ws.refuse("cairn: negative start revision")
		return
	case len(cr.Key) > s.cfg.MaxKeySize || len(cr.RangeEnd) > s.cfg.MaxKeySize+1:
		// No key is longer; an end one byte longer is the first key
		// after a longest key. The watcher would keep either.
		ws.refuse(fmt.Sprintf("cairn: key of %d bytes or range end of %d, over the %d-byte key limit",
			len(cr.Key), len(cr.RangeEnd), s.cfg.MaxKeySize))
		return
	case len(cr.RangeEnd) > 0:
		w.end = cr.RangeEnd
		if !bytes.Equal(w.end, []byte{0}) && bytes.Compare(w.key, w.end) >= 0 {
			ws.refuse("mvcc: watcher range is empty") // etcd's answer
			return
		}
	}
	for _, f := range cr.Filters {
		w.noPut = w.noPut || f == pb.WatchCreateRequest_NOPUT
		w.noDelete = w.noDelete || f == pb.WatchCreateRequest_NODELETE
	}
	w.shards = s.b.WatchShards(w.key, w.end)
	// Where each shard's stream starts: the given revision, or the
	// shard's current one (a read index, so nothing acknowledged before
	// the watch was created is reported as new).
	start := map[uint64]uint64{}
	headerRev := uint64(0)
	for i, id := range w.shards {
		from := uint64(cr.StartRevision)
		if from == 0 {
			ctx, cancel := s.withDeadline(ws.ctx)
			now, err := s.b.ShardRevision(ctx, id)
			cancel()
			if err != nil {
				if errors.Is(err, kv.ErrStopped) || (w.end == nil && errors.Is(err, kv.ErrNoReplica)) {
					// Another node can serve it: end the stream, as a
					// pump does, and the client creates the watch again
					// there. (A refusal ends the watch with an error, and
					// clientv3 sends the next watch of the key on this
					// same stream while other watches keep it open.)
					ws.fail(status.Error(codes.Unavailable, "cairn: "+err.Error()))
					return
				}
				ws.refuse(grpcError(err).Error())
				return
			}
			from = now + 1
		}
		start[id] = from
		w.rev[id] = from - 1
		if i == 0 || from-1 < headerRev {
			headerRev = from - 1
		}
	}
	ws.mu.Lock()
	if len(ws.mu.watchers) >= maxWatchersPerStream {
		ws.mu.Unlock()
		ws.refuse(fmt.Sprintf("cairn: more than %d watchers on one stream", maxWatchersPerStream))
		return
	}
	w.id = cr.WatchId
	if w.id == 0 {
		for ws.mu.watchers[ws.mu.nextID] != nil {
			ws.mu.nextID++
		}
		w.id = ws.mu.nextID
		ws.mu.nextID++
	} else if ws.mu.watchers[w.id] != nil {
		ws.mu.Unlock()
		ws.refuse("etcdserver: duplicated watch ID")
		return
	}
	ws.mu.watchers[w.id] = w
	ws.mu.Unlock()
	w.ctx, w.cancel = context.WithCancel(ws.ctx)
	if !ws.send(&pb.WatchResponse{Header: s.header(headerRev), WatchId: w.id, Created: true}) {
		return
	}
	for _, id := range w.shards {
		ws.start(w, func() { ws.pump(w, id, start[id]) })
	}
	if w.progress {
		ws.start(w, func() { ws.tick(w) })
	}
}

// start runs f for watcher w under both w's and the stream's WaitGroups.
func (ws *watchStream) start(w *watcher, f func()) {
	ws.wg.Add(1)
	w.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		defer w.wg.Done()
		f()
	}()
}

func (ws *watchStream) cancelWatch(id int64) {
	ws.mu.Lock()
	w := ws.mu.watchers[id]
	delete(ws.mu.watchers, id)
	ws.mu.Unlock()
	if w == nil {
		return // etcd answers nothing for an unknown id
	}
	w.cancel()
	w.wg.Wait() // no event of w after the answer
	ws.send(&pb.WatchResponse{Header: ws.s.header(w.progressRev()), WatchId: id, Canceled: true})
}

// progressRev is the revision up to which w has sent every event: for one
// shard, that shard's; for several, the lowest (a client that resumes
// from it gets events again rather than miss one).
func (w *watcher) progressRev() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.progressRevLocked()
}

func (w *watcher) progressRevLocked() uint64 {
	var rev uint64
	for i, id := range w.shards {
		if r := w.rev[id]; i == 0 || r < rev {
			rev = r
		}
	}
	return rev
}

// sendProgress sends w's progress. It holds w.mu while it sends, as pump
// does while it sends events and moves w.rev on, so a progress answer
// never reports a revision whose events are still to come, nor one below
// events already sent.
func (ws *watchStream) sendProgress(w *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rev := w.progressRevLocked(); rev > 0 && w.ctx.Err() == nil {
		ws.send(&pb.WatchResponse{Header: ws.s.header(rev), WatchId: w.id})
	}
}

// tick sends w's progress every ProgressInterval.
func (ws *watchStream) tick(w *watcher) {
	t := time.NewTicker(ws.s.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ws.sendProgress(w)
		case <-w.ctx.Done():
			return
		}
	}
}

// matches reports whether w reports a change of key.
func (w *watcher) matches(key []byte, del bool) bool {
	if len(key) == 0 || (del && w.noDelete) || (!del && w.noPut) {
		return false
	}
	if w.end == nil {
		return bytes.Equal(key, w.key)
	}
	return bytes.Compare(key, w.key) >= 0 && (bytes.Equal(w.end, []byte{0}) || bytes.Compare(key, w.end) < 0)
}

// event is the etcd form of a change (see the package doc for what
// create_revision and version report).
func (w *watcher) event(e *kv.Event) *mvccpb.Event {
	out := &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: e.Key, Value: e.Value,
		ModRevision: int64(e.Index), CreateRevision: int64(e.Index), Version: 1, Lease: leaseIn(e.Terms)}}
	if e.Delete {
		out.Type = mvccpb.DELETE
		out.Kv = &mvccpb.KeyValue{Key: e.Key, ModRevision: int64(e.Index)}
	}
	if w.prevKV && e.PrevVersion > 0 {
		out.PrevKv = &mvccpb.KeyValue{Key: e.Key, Value: e.PrevValue,
			ModRevision: int64(e.PrevVersion), CreateRevision: int64(e.PrevVersion), Version: 1, Lease: leaseIn(e.PrevTerms)}
	}
	return out
}

// pump sends w's events of shard id from index from on, as this node's
// replica applies them, until w or the stream ends. Once a split has
// changed the shards holding w's keys (watch_split.go), it ends w when
// it has sent every event its shard's replica had applied.
func (ws *watchStream) pump(w *watcher, id, from uint64) {
	for {
		split := w.resharded(ws.s.b) // before the read: see watch_split.go
		next, changed, ok := ws.step(w, id, from)
		if !ok {
			return
		}
		if next > from {
			from = next
			continue // there may be more: read again before waiting
		}
		if split {
			ws.endSplit(w, id, from)
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Second): // the replica may have gone
		case <-w.ctx.Done():
			return
		}
	}
}

// step reads a page of shard id's history from index from and sends w's
// events of it. It holds one of the stream's page slots from the read to
// the send, so a client that stops reading keeps at most
// watchPagesPerStream pages on the node, however many watchers it has.
// next is where to read on from, changed is closed when the replica
// applies more; ok is false once w (or the stream) has ended.
func (ws *watchStream) step(w *watcher, id, from uint64) (next uint64, changed <-chan struct{}, ok bool) {
	select {
	case ws.pages <- struct{}{}:
	case <-w.ctx.Done():
		return 0, nil, false
	}
	defer func() { <-ws.pages }()
	page, changed, err := ws.s.b.ShardEvents(id, from, watchPageBytes)
	var ce *kv.CompactedError
	switch {
	case errors.As(err, &ce):
		ws.compacted(w, ce.Floor+1, "")
		return 0, nil, false
	case err != nil:
		// This node cannot serve the shard any more (its replica was
		// moved away, or it is stopping): end the stream, and the
		// client resumes its watches elsewhere.
		ws.fail(status.Error(codes.Unavailable, "cairn: "+err.Error()))
		return 0, nil, false
	}
	var evs []*mvccpb.Event
	for i := range page.Events {
		e := &page.Events[i]
		if !w.matches(e.Key, e.Delete) {
			continue
		}
		if w.prevKV && e.PrevMissing {
			// The value this change replaced is no longer in the
			// history (the watch fell more than half the retention
			// behind): send what came before it, then answer as
			// compacted at it, as for a start the history no longer
			// holds.
			if len(evs) > 0 && !ws.sendEvents(w, id, e.Index-1, evs) {
				return 0, nil, false
			}
			ws.compacted(w, e.Index+1, "")
			return 0, nil, false
		}
		evs = append(evs, w.event(e))
	}
	if len(evs) > 0 && !ws.sendEvents(w, id, page.Next-1, evs) {
		return 0, nil, false
	}
	w.mu.Lock()
	w.rev[id] = max(w.rev[id], page.Next-1)
	w.mu.Unlock()
	return page.Next, changed, true
}

// sendEvents sends w's events evs of shard id, every one of that shard's
// up to rev, and moves w's progress there; false when the stream failed.
// It sends under w.mu: see sendProgress.
func (ws *watchStream) sendEvents(w *watcher, id, rev uint64, evs []*mvccpb.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ws.send(&pb.WatchResponse{Header: ws.s.header(rev), WatchId: w.id, Events: evs}) {
		return false
	}
	w.rev[id] = max(w.rev[id], rev)
	return true
}

// compacted ends w: its start is older than a shard's history keeps.
// compactRev is the oldest revision that shard can still serve; reason,
// if any, says why.
func (ws *watchStream) compacted(w *watcher, compactRev uint64, reason string) {
	w.mu.Lock()
	first := !w.compacted
	w.compacted = true
	w.mu.Unlock()
	if !first {
		return
	}
	ws.mu.Lock()
	delete(ws.mu.watchers, w.id)
	ws.mu.Unlock()
	w.cancel()
	ws.send(&pb.WatchResponse{Header: ws.s.header(compactRev - 1), WatchId: w.id, Canceled: true,
		CompactRevision: int64(compactRev), CancelReason: reason})
}
