package transport

import (
	"context"

	"google.golang.org/grpc"
)

// Nodes of earlier versions take raft messages only on the gRPC stream
// /cairn.Peer/Raft; they close a raft stream after greeting it as HTTP/2.
// The sender notices (rawOut.watch) and sends to such a peer on that
// stream instead, as those versions did. When the stream fails (the peer
// restarted, perhaps upgraded) the sender tries the raft stream again.

// legacyStream is a sender's gRPC stream to a peer of an earlier version.
type legacyStream struct {
	s      grpc.ClientStream
	cancel context.CancelFunc
}

func (l *legacyStream) close() {
	if l.cancel != nil {
		l.cancel()
	}
	l.s, l.cancel = nil, nil
}

// isHTTP2Settings reports whether b is the header of an HTTP/2 SETTINGS
// frame on stream 0, which an HTTP/2 server sends first.
func isHTTP2Settings(b [9]byte) bool {
	return b[3] == 0x4 && b[5]&0x7f == 0 && b[6] == 0 && b[7] == 0 && b[8] == 0
}

// sendLegacy sends envs as one frame on the gRPC stream to p, opening it
// if need be; on failure it reports them and goes back to the raft stream
// for the next batch.
func (t *GRPC) sendLegacy(p *peer, l *legacyStream, envs []Envelope) {
	if l.s == nil {
		ctx, cancel := context.WithCancel(p.ctx)
		s, err := p.conn.NewStream(ctx, &serviceDesc.Streams[0], "/cairn.Peer/Raft")
		if err != nil {
			cancel()
			p.reachable.Store(false)
			p.legacy.Store(false)
			t.report(p.id, envs)
			return
		}
		l.s, l.cancel = s, cancel
	}
	if err := l.s.SendMsg(&frame{b: EncodeBatch(envs)}); err != nil {
		l.close()
		p.reachable.Store(false)
		p.legacy.Store(false)
		t.report(p.id, envs)
		return
	}
	p.reachable.Store(true)
}
