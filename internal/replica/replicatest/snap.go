package replicatest

import (
	"context"
	"errors"
	"testing/synctest"

	"github.com/cairn-db/cairn/internal/store"
	"go.etcd.io/raft/v3/raftpb"
)

// snapChunk is the chunk size of the harness's snapshot streams: small,
// so that even a shard of a few keys streams in several chunks.
const snapChunk = 64

// ErrStreamBroken is what the receiver reads from a stream the script
// broke (drop-snapshot).
var ErrStreamBroken = errors.New("replicatest: snapshot stream broken")

// stream is a snapshot in flight: the sender's data streamed into the
// receiver's Replica.ReceiveSnapshot, in a goroutine of the bubble that
// returns once the receiver's raft took or refused the snapshot (a later
// round of the receiver), as the transport's SendSnapshot does.
type stream struct {
	m       raftpb.Message
	fromGen int
	// chunks and bytes the sender streamed (all of it is read before the
	// receiver queues the MsgSnap).
	chunks, bytes int
	res           chan streamResult // the receiver's outcome
}

type streamResult struct {
	installed bool
	err       error
}

// deliverSnapshot streams a MsgSnap the way the store does: the sender
// opens the engine snapshot its raft pinned (Replica.OpenSnapshot), the
// receiver's store checks the message (store.CheckMessage, viaSnapshot)
// and the receiver spills the chunks and hands raft the MsgSnap once the
// whole stream arrived (Replica.ReceiveSnapshot). With breakAfter >= 0 the
// stream breaks after that many chunks: nothing may be installed. The
// outcome is reported to the sender (ReportSnapshot) once the receiver is
// done, by settle.
func (e *Env) deliverSnapshot(m raftpb.Message, breakAfter int) {
	from, to := e.nodes[m.From], e.nodes[m.To]
	src, err := from.Replica.OpenSnapshot(m, snapChunk)
	if err != nil {
		e.printf("snapshot %d->%d not sent: %v", m.From, m.To, err)
		from.Replica.ReportSnapshot(m.To, false)
		return
	}
	if why := store.CheckMessage(to.Replica.Desc(), to.ID, &m, true); why >= 0 {
		src.Close()
		e.printf("refused %s (%s)", describe(m), store.DropReasons[why])
		from.Replica.ReportSnapshot(m.To, false)
		return
	}
	s := &stream{m: m, fromGen: from.gen, res: make(chan streamResult, 1)}
	e.streams = append(e.streams, s)
	next := src.Next
	if breakAfter >= 0 {
		n := 0
		next = func() ([]byte, error) {
			if n == breakAfter {
				return nil, ErrStreamBroken
			}
			n++
			return src.Next()
		}
	}
	r := to.Replica
	go func() {
		installed, err := r.ReceiveSnapshot(context.Background(), m, next)
		s.res <- streamResult{installed, err}
	}()
	// Once the bubble is still, the receiver has read the whole stream
	// (or its broken part) and queued the MsgSnap, or failed.
	synctest.Wait()
	s.chunks, s.bytes, _ = src.Stats()
	src.Close()
	e.settle()
}

// settleStreams reports the snapshot streams that ended since the last
// call (settle calls it once every goroutine of the bubble is blocked, so
// reading a stream's fields races with nothing).
func (e *Env) settleStreams() {
	kept := e.streams[:0]
	for _, s := range e.streams {
		var r streamResult
		select {
		case r = <-s.res:
		default:
			kept = append(kept, s)
			continue
		}
		what := "refused"
		switch {
		case r.err != nil:
			what = "failed: " + r.err.Error()
		case r.installed:
			what = "installed"
		}
		e.printf("snapshot %d->%d snap=%d/%d (%d chunks, %d bytes): %s", s.m.From, s.m.To,
			s.m.Snapshot.Metadata.Term, s.m.Snapshot.Metadata.Index, s.chunks, s.bytes, what)
		// The store's sender reports success once the receiver handled
		// the stream, whether or not its raft took the snapshot.
		if from := e.nodes[s.m.From]; from != nil && from.gen == s.fromGen {
			from.Replica.ReportSnapshot(s.m.To, r.err == nil)
		}
	}
	for i := len(kept); i < len(e.streams); i++ {
		e.streams[i] = nil
	}
	e.streams = kept
}

// releaseSnapshot lets go of the engine snapshot a lost MsgSnap named (the
// store's sender opens it before the transport fails).
func (e *Env) releaseSnapshot(nd *Node, m raftpb.Message) {
	if src, err := nd.Replica.OpenSnapshot(m, snapChunk); err == nil {
		src.Close()
	}
}
