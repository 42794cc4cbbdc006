package http2

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

const (
	preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	// streamWindow is the receive window announced per stream, connWindow
	// the connection's (kept topped up as data arrives).
	streamWindow = 1 << 20
	connWindow   = 16 << 20
	// defaultWindow is the initial window of RFC 9113 §6.9.2.
	defaultWindow = 65535
	// partBytes: an answer longer goes out in parts.
	partBytes = 64 << 10
	// maxCtrl bounds the control frames (acks, resets) waiting for the
	// writer: beyond it the client is not reading and the connection ends.
	maxCtrl = 4096
)

// conn is one HTTP/2 connection: the reader (serve) parses frames and
// starts handlers; the writer (writeLoop) writes frames and answers.
type conn struct {
	s      *Server
	nc     net.Conn
	tls    *tls.ConnectionState
	remote string
	ctx    context.Context
	cancel context.CancelFunc

	// Reader-owned.
	streams  map[uint32]*stream
	lastID   uint32
	recvConn int64 // connection receive window left

	// mu guards the writer's queue and the send windows.
	mu struct {
		sync.Mutex
		queue []*part
		// ctrl: control frames to send (settings acks, pings, resets).
		ctrl []func(*http2.Framer) error
		// connUpdate: connection window to give back; streamUpdates:
		// stream windows to give back.
		connUpdate    uint32
		streamUpdates map[uint32]uint32
		sendConn      int64
		initialWindow int64
		maxFrame      uint32
		// dead: the writer stopped (the connection failed).
		dead bool
		// goAway: a GOAWAY is due; goneAway: it was sent.
		goAway, goneAway bool
		// running: handlers running or answers not fully written.
		running int
		// active: the streams being answered, by id.
		active map[uint32]*stream
		// lastID: the highest stream id the reader took.
		lastID uint32
		// readDone: the reader stopped reading.
		readDone bool
		// idleAt: when the reader's deadline passes (zero: it has none).
		idleAt time.Time
		// connStallAt: when the answers waiting for the connection's
		// send window end the connection (zero: none waits; stall.go).
		connStallAt time.Time
		// sent: the bytes of answers sent on the connection so far.
		sent int64
	}
	wake       chan struct{}
	writerDone chan struct{}
	// stallTimer: the writer's, while an answer waits for window.
	stallTimer *time.Timer
}

// stream is one request: received by the reader, answered by a handler.
type stream struct {
	id     uint32
	req    *http.Request
	body   []byte
	held   int64 // body budget held
	recv   int64 // stream receive window left
	ctx    context.Context
	cancel context.CancelFunc
	// refused: the stream was answered without its handler; later DATA
	// is dropped.
	refused bool
	// Guarded by conn.mu.
	sendWin int64
	reset   bool
	// The answer's stall clock (stall.go): clock: it runs (the answer
	// waited for window, and minProgress bytes did not go out since);
	// waitFrom: when its current wait began (zero: it does not wait);
	// waited: how long its earlier waits took; progress: the bytes sent
	// since the clock started; connMark: the connection's sent then.
	clock    bool
	waitFrom time.Time
	waited   time.Duration
	progress int64
	connMark int64
}

// part is a piece of an answer for the writer.
type part struct {
	st     *stream
	status int         // > 0: HEADERS first
	header http.Header // with status
	data   []byte
	end    bool
	// rst: reset the stream with this code instead (after what was sent).
	rst http2.ErrCode
	// done, if set, is closed once the part is written or dropped.
	done chan struct{}
	// err is set before done closes when the part was dropped.
	err error
	// headSent: the HEADERS went out; the data is partly written.
	headSent bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, streams: map[uint32]*stream{}, recvConn: connWindow,
		wake: make(chan struct{}, 1), writerDone: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.streamUpdates = map[uint32]uint32{}
	c.mu.active = map[uint32]*stream{}
	c.mu.sendConn = defaultWindow
	c.mu.initialWindow = defaultWindow
	c.mu.maxFrame = 16 << 10
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	c.remote = nc.RemoteAddr().String()
	return c
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// goAway asks the writer to send GOAWAY; the reader stops taking streams.
func (c *conn) goAway() {
	c.mu.Lock()
	c.mu.goAway = true
	// Wakes the reader, which then drains: it reads whole frames only
	// (readFrame), so a frame it was waiting for is not cut.
	_ = c.nc.SetReadDeadline(time.Now())
	c.mu.Unlock()
	c.signal()
}

// kill closes the connection at once.
func (c *conn) kill() {
	c.cancel()
	c.nc.Close()
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.mu.conns, c)
		c.s.mu.Unlock()
	}()
	defer c.cancel()
	go c.writeLoop()
	err := c.readLoop()
	c.s.logf("http2: connection read ended", "remote", c.remote, "err", err)
	var ce http2.ConnectionError
	c.mu.Lock()
	c.mu.readDone = true
	if errors.As(err, &ce) {
		code := http2.ErrCode(ce)
		c.mu.ctrl = append(c.mu.ctrl, func(fr *http2.Framer) error {
			return fr.WriteGoAway(c.lastID, code, nil)
		})
		c.mu.goneAway = true
	} else if !errors.Is(err, io.EOF) && !c.mu.goAway {
		// A broken connection: its requests are abandoned.
		c.cancel()
	}
	c.mu.Unlock()
	c.signal()
	<-c.writerDone
	c.nc.Close()
	for _, st := range c.streams {
		st.drop(c)
	}
}

// drop releases a stream the reader still holds (its handler never ran).
func (st *stream) drop(c *conn) {
	c.s.giveBody(st.held)
	st.held = 0
	if st.cancel != nil {
		st.cancel()
	}
}

func (c *conn) ctrl(f func(*http2.Framer) error) {
	c.mu.Lock()
	c.mu.ctrl = append(c.mu.ctrl, f)
	c.mu.Unlock()
	c.signal()
}

// resetStream resets stream id and forgets it.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	if st := c.streams[id]; st != nil {
		delete(c.streams, id)
		st.drop(c)
	}
	c.ctrl(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, code) })
}

// answer sends a short answer without a handler (the stream is refused).
// open: the client may still send DATA on it.
func (c *conn) answer(st *stream, status int, msg string, ended bool) {
	h, body := c.s.rejection(status, msg)
	c.mu.Lock()
	if _, open := c.streams[st.id]; !open {
		st.sendWin = c.mu.initialWindow
	}
	c.mu.running++
	c.mu.active[st.id] = st
	c.mu.Unlock()
	c.enqueue(&part{st: st, status: status, header: h, data: body, end: true})
	if !ended {
		// The client may still be sending the body: it is read and dropped.
		st.refused = true
	}
}

// rejection is the header and body of the server's own answer of status
// (Reject's, or plain text).
func (s *Server) rejection(status int, msg string) (http.Header, []byte) {
	w := &rejectWriter{header: make(http.Header, 2), status: status}
	if s.Reject != nil {
		s.Reject(w, status, msg)
	} else {
		w.header.Set("Content-Type", "text/plain; charset=utf-8")
		w.body = []byte(msg + "\n")
	}
	if status == http.StatusServiceUnavailable {
		w.header.Set("Retry-After", "1")
	}
	return w.header, w.body
}

// rejectWriter collects what Reject writes (its status is the one
// given).
type rejectWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *rejectWriter) Header() http.Header { return w.header }
func (w *rejectWriter) WriteHeader(int)     {}
func (w *rejectWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

func (c *conn) enqueue(p *part) {
	c.mu.Lock()
	if c.mu.dead || p.st.reset {
		c.mu.Unlock()
		p.drop(errStreamGone)
		if p.end {
			c.answered(p.st)
		}
		return
	}
	c.mu.queue = append(c.mu.queue, p)
	c.mu.Unlock()
	c.signal()
}

// answered: st's answer is fully written or dropped.
func (c *conn) answered(st *stream) {
	c.mu.Lock()
	c.answeredLocked(st)
	c.mu.Unlock()
	c.signal()
}

func (c *conn) answeredLocked(st *stream) {
	c.mu.running--
	if c.mu.active[st.id] == st {
		delete(c.mu.active, st.id)
	}
	if c.mu.running == 0 && !c.mu.readDone {
		if !c.mu.goAway {
			// The reader may be waiting for a frame without a deadline:
			// the client owes the next one now.
			c.armReadLocked()
		} else {
			// The drain may wait for this last answer: wake it.
			_ = c.nc.SetReadDeadline(time.Now())
		}
	}
}

// armReadLocked sets the reader's deadline (c.mu held, so the reader and
// the last answer never undo each other's): IdleTimeout from now while no
// handler runs and no answer waits to be written — the client owes the
// next frame, be it a new request or the rest of a body it began — and
// none while the server owes answers.
func (c *conn) armReadLocked() {
	if c.mu.running == 0 {
		c.mu.idleAt = time.Now().Add(c.s.idleTimeout())
	} else {
		c.mu.idleAt = time.Time{}
	}
	_ = c.nc.SetReadDeadline(c.mu.idleAt)
}

var errStreamGone = errors.New("http2: stream reset or connection closed")

func (p *part) drop(err error) {
	p.err = err
	if p.done != nil {
		close(p.done)
	}
}
