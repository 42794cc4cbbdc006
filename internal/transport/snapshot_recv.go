package transport

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
)

// frameReader receives the frames of one incoming snapshot stream on a
// goroutine of its own, so that the wait for each can be bounded
// (Config.SnapshotIdleTimeout): gRPC's RecvMsg waits as long as the
// stream lives, and a sender that stopped sending without closing (paused,
// stuck, or behind a partition that drops its packets) would otherwise
// hold its stream, and the slot it took, for good.
//
// The goroutine reads at most one frame ahead of the handler. It ends
// after the stream's last frame or error, or, once the handler gave up
// (close), when gRPC ends the stream — right after the handler returns.
type frameReader struct {
	frames chan received
	done   chan struct{}
	idle   time.Duration
	timer  *time.Timer
	// err, once set (the stream's end, an error, or idleness), is what
	// every later next returns.
	err error
	// idled: the stream went quiet for longer than idle.
	idled bool
}

type received struct {
	b   []byte
	err error
}

// newFrameReader starts reading s; close stops it.
func newFrameReader(s grpc.ServerStream, idle time.Duration) *frameReader {
	r := &frameReader{frames: make(chan received), done: make(chan struct{}), idle: idle,
		timer: time.NewTimer(idle)}
	r.timer.Stop()
	go r.run(s)
	return r
}

func (r *frameReader) run(s grpc.ServerStream) {
	for {
		var f frame
		err := s.RecvMsg(&f)
		select {
		case r.frames <- received{b: f.b, err: err}:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the stream's next frame, or its error (io.EOF once the
// client closed its side), or ErrSnapshotIdle if none came within the
// idle bound.
func (r *frameReader) next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.timer.Reset(r.idle)
	defer r.timer.Stop()
	select {
	case got := <-r.frames:
		r.err = got.err
		return got.b, got.err
	case <-r.timer.C:
		r.idled = true
		r.err = fmt.Errorf("%w: nothing received for %v (SnapshotIdleTimeout)", ErrSnapshotIdle, r.idle)
		return nil, r.err
	}
}

// close tells the reading goroutine that nobody will take its frames.
func (r *frameReader) close() { close(r.done) }
