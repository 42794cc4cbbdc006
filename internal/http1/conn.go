package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/deadline"
)

// conn is one client connection: a reader that parses requests and starts
// their handlers, and a writer that writes the answers in order.
type conn struct {
	s  *Server
	nc net.Conn
	// stopping: Shutdown asked the reader to stop, or the writer gave up.
	stopping atomic.Bool
	// linger: a request body was left unread.
	linger atomic.Bool
	remote string
	// ctx is every request's parent: canceled when the connection fails
	// or Shutdown runs out of time.
	ctx    context.Context
	cancel context.CancelFunc
	// deadlines hands out request contexts under ctx (nil: ctx itself).
	deadlines *deadline.Windows
	// gone ends when the client closed its side of the connection (or the
	// connection failed): requests already read still run and answer,
	// but a long run (a profile, a trace) can stop (ClientGone).
	gone       context.Context
	clientLeft context.CancelFunc

	// mu guards the answer bytes waiting on the connection
	// (Server.MaxAnswerBytes); cond wakes the reader when they drain.
	mu struct {
		sync.Mutex
		cond *sync.Cond
		// unwritten: bytes of finished answers not yet written.
		unwritten int64
		// running: handlers started and not finished.
		running int
		// estimate: the size a running handler's answer is counted
		// with: the largest recent answer, halving with each smaller one.
		estimate int64
		// queued: answers handed to the writer (or written inline) and
		// not yet written; 0: the writer is idle with nothing buffered.
		queued int
	}
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.gone, c.clientLeft = context.WithCancel(c.ctx)
	c.ctx = context.WithValue(c.ctx, clientGoneKey{}, c.gone.Done())
	c.mu.cond = sync.NewCond(&c.mu.Mutex)
	c.mu.estimate = s.maxAnswerBytes() / 16
	return c
}

// requestContext is the context of a request read now.
func (c *conn) requestContext() context.Context {
	if c.deadlines == nil {
		return c.ctx
	}
	return c.deadlines.Context(time.Now())
}

// slot is one answer, in request order.
type slot struct {
	done chan struct{}
	// head and body are written in turn (the body is not copied).
	head, body []byte
	// counted: the answer is counted in the connection's unwritten bytes.
	counted bool
	// close: the connection closes after this answer.
	close bool
}

func (sl *slot) size() int64 { return int64(len(sl.head) + len(sl.body)) }

func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
	c.mu.Lock()
	c.mu.cond.Broadcast()
	c.mu.Unlock()
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.mu.conns, c)
		c.s.mu.Unlock()
	}()
	defer c.cancel()
	if !c.handshake() {
		return
	}
	br := bufio.NewReaderSize(c.nc, 16<<10)
	// The first request's head must arrive within the header timeout,
	// counted from the accept; then sniff the HTTP/2 preface ("PRI " is
	// no HTTP/1 method in use) under the same deadline.
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.headerTimeout()))
	p, err := br.Peek(4)
	if err != nil {
		c.nc.Close()
		return
	}
	if string(p) == h2Preface[:4] {
		if c.s.H2 == nil || c.s.h2lis == nil {
			c.nc.Close()
			return
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		c.handOver(&bufConn{Conn: c.nc, r: br})
		return
	}
	if c.s.RequestTimeout > 0 {
		c.deadlines = deadline.New(c.ctx, c.s.RequestTimeout, 0)
	}
	c.remote = c.nc.RemoteAddr().String()
	slots := make(chan *slot, c.s.maxPipeline())
	writerDone := make(chan struct{})
	go c.writeLoop(slots, writerDone)
	c.readLoop(br, slots)
	close(slots)
	<-writerDone
	if c.linger.Load() {
		lingerClose(c.nc, br)
		return
	}
	c.nc.Close()
}

// lingerClose closes nc after reading (and dropping) what the client is
// still sending for a moment, so that closing does not reset the
// connection before the client has read the answer.
func lingerClose(nc net.Conn, br *bufio.Reader) {
	if tc, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var r io.Reader = nc
	if br != nil {
		r = br
	}
	_, _ = io.CopyN(io.Discard, r, 16<<20)
	nc.Close()
}

// readLoop parses requests until the connection ends, a request asks to
// close it, or a request is malformed.
func (c *conn) readLoop(br *bufio.Reader, slots chan<- *slot) {
	for first := true; ; first = false {
		if !c.admit() {
			return
		}
		if br.Buffered() == 0 {
			// Wait for the next request's first byte; its head must then
			// arrive within the header timeout.
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.idleTimeout()))
			if _, err := br.Peek(1); err != nil {
				c.readFailed(err)
				return
			}
		}
		if !first {
			// (The first request's head runs on the deadline from the accept.)
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.headerTimeout()))
		}
		req, held, closeAfter, err := c.readRequest(br, slots)
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				c.s.logf("http1: bad request", "remote", c.remote, "err", err)
				sl := &slot{done: make(chan struct{}), close: true}
				sl.head, sl.body = c.rejection(pe)
				close(sl.done)
				c.queue(slots, sl)
				if pe.Status == http.StatusRequestEntityTooLarge || pe.Status == http.StatusServiceUnavailable {
					c.linger.Store(true)
				}
				return
			}
			c.readFailed(err)
			return
		}
		sl := &slot{done: make(chan struct{}), close: closeAfter}
		if c.s.Inline != nil && br.Buffered() == 0 && c.s.Inline(req) && c.startInline() {
			// A lone request: nothing pipelined behind it and every
			// earlier answer written. The reader runs its handler and
			// writes its answer itself, without waking a handler
			// goroutine and the writer (two hand-offs of the request's
			// latency).
			if !c.serveInline(req, held, sl) {
				return
			}
			continue
		}
		c.queue(slots, sl) // blocks while MaxPipeline answers are pending
		c.mu.Lock()
		c.mu.running++
		c.mu.Unlock()
		c.s.work.Run(func() { c.handle(req, held, sl) })
		if closeAfter {
			return
		}
	}
}

// queue hands sl to the writer.
func (c *conn) queue(slots chan<- *slot, sl *slot) {
	c.mu.Lock()
	c.mu.queued++
	c.mu.Unlock()
	slots <- sl
}

// startInline claims the connection's socket for an answer written by the
// reader: true when no answer is queued for the writer (which then waits
// for its next slot, its buffer flushed) and none is running.
func (c *conn) startInline() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.queued != 0 || c.mu.running != 0 || c.stopping.Load() {
		return false
	}
	c.mu.queued++
	c.mu.running++
	return true
}

// serveInline runs the handler of a request claimed by startInline and
// writes its answer; false: the connection is done (the answer closes
// it, the handler aborted, or the write failed).
func (c *conn) serveInline(req *http.Request, held int64, sl *slot) bool {
	c.handle(req, held, sl)
	ok := !sl.close
	switch {
	case sl.head == nil && sl.close: // aborted handler
	default:
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.writeTimeout()))
		var err error
		if len(sl.body) <= 4<<10 {
			// One write (one TLS record) for a small answer.
			_, err = c.nc.Write(append(sl.head, sl.body...))
		} else {
			_, err = (&net.Buffers{sl.head, sl.body}).WriteTo(c.nc)
		}
		ok = ok && err == nil
	}
	c.written(sl)
	sl.head, sl.body = nil, nil
	if !ok {
		c.abort()
	}
	return ok
}

// admit waits until the answers waiting on the connection leave room for
// another handler (Server.MaxAnswerBytes); false: stop reading.
func (c *conn) admit() bool {
	limit := c.s.maxAnswerBytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.mu.unwritten+int64(c.mu.running)*c.mu.estimate >= limit && !c.stopping.Load() {
		if c.mu.running == 0 && c.mu.unwritten < limit {
			break // one handler at a time always runs
		}
		c.mu.cond.Wait()
	}
	return !c.stopping.Load()
}

// finished counts a handler's answer as waiting to be written.
func (c *conn) finished(sl *slot) {
	n := sl.size()
	c.mu.Lock()
	c.mu.running--
	c.mu.unwritten += n
	sl.counted = true
	if n > c.mu.estimate {
		c.mu.estimate = n
	} else {
		c.mu.estimate = max(c.mu.estimate/2, n, 256)
	}
	c.mu.cond.Broadcast()
	c.mu.Unlock()
}

// written uncounts an answer written (or dropped).
func (c *conn) written(sl *slot) {
	c.mu.Lock()
	c.mu.queued--
	if sl.counted {
		c.mu.unwritten -= sl.size()
		c.mu.cond.Broadcast()
	}
	c.mu.Unlock()
}

// readFailed ends reading: a clean end (EOF, Shutdown, idle timeout) lets
// the pending requests finish; a broken connection cancels them.
func (c *conn) readFailed(err error) {
	var ne net.Error
	if errors.Is(err, io.EOF) {
		c.clientLeft()
		return
	}
	if c.stopping.Load() || errors.As(err, &ne) && ne.Timeout() {
		return
	}
	c.cancel()
}

type clientGoneKey struct{}

// ClientGone returns a channel closed once the client of the request whose
// context is ctx has closed its side of the HTTP/1.1 connection (or the
// connection broke). Requests already read still run and their answers are
// still written (a client may half-close after pipelining), so only a
// handler that runs long and would be wasted work (a profile, a trace)
// should stop on it. Nil (never closed) for other contexts.
func ClientGone(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(clientGoneKey{}).(<-chan struct{})
	return ch
}

// handle runs the handler for one request and fills its slot. held is
// the request body's share of the body budget, given back when the
// handler returns.
func (c *conn) handle(req *http.Request, held int64, sl *slot) {
	w := &responseWriter{header: make(http.Header, 4), head: req.Method == http.MethodHead}
	defer func() {
		c.s.bodies.give(held)
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				sl.close = true
				sl.head, sl.body = nil, nil
			} else {
				if c.s.Logger != nil {
					c.s.Logger.Error("http1: handler panic", "method", req.Method, "uri", req.RequestURI, "panic", fmt.Sprint(p))
				}
				w = &responseWriter{header: make(http.Header, 2)}
				reject(c.s, w, http.StatusInternalServerError, "internal error")
				sl.close = true
				sl.head, sl.body = w.serialize(true, req.ProtoMinor)
			}
		}
		c.finished(sl)
		close(sl.done)
	}()
	c.s.Handler.ServeHTTP(w, req)
	sl.head, sl.body = w.serialize(sl.close, req.ProtoMinor)
}

func reject(s *Server, w http.ResponseWriter, status int, msg string) {
	if s.Reject != nil {
		s.Reject(w, status, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// rejection is the answer to a malformed or refused request.
func (c *conn) rejection(pe *ProtocolError) (head, body []byte) {
	w := &responseWriter{header: make(http.Header, 2)}
	if pe.Status == http.StatusServiceUnavailable {
		w.header.Set("Retry-After", "1")
	}
	reject(c.s, w, pe.Status, pe.Msg)
	return w.serialize(true, 1)
}

// abort stops reading and closes the write side; pending handlers still
// run to completion (their answers are dropped).
func (c *conn) abort() {
	c.stopReading()
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}
