package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"github.com/cairn-db/cairn/internal/lab/result"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
)

// The closed loop over HTTP/1.1 without a goroutine per client. Each
// connection has a writer and a reader goroutine. A client is a state
// machine: when its answer arrives, the reader records it and appends the
// client's next request to the buffer of the connection it goes to; that
// connection's writer is woken once the reader has taken every answer it
// had buffered, so one write carries the requests of many clients. On a
// machine whose cores the load generator shares with the system under
// test, this spends far less of them per operation than a goroutine per
// client handing each request to a writer (docs/performance.md). The load
// model is the same: Clients closed loops sharing Conns connections, each
// waiting for its answer before its next request.

// loopClient is one closed-loop client.
type loopClient struct {
	rng      *rand.Rand
	conn     int // its connection number, as the goroutine runner's
	op       Op
	step     int // the op's request in flight (a read-modify-write has two)
	intended time.Time
	sent     time.Time // its last attempt, after a refusal (else intended)
}

// loopConn is one connection of the loop with its pending requests.
type loopConn struct {
	run *loopRun
	l   *link

	mu    sync.Mutex
	nc    net.Conn      // nil: to dial
	out   []byte        // requests not yet written
	sent  []*loopClient // clients with a request in out or unanswered, in order
	wait  []*loopClient // beyond the pipeline depth, in order
	moved time.Time     // last answer, or when sent became non-empty
	wake  chan struct{} // cap 1
}

type loopRun struct {
	ctx       context.Context
	waits     context.Context // ends a refused request's wait (see Run)
	retryWait time.Duration   // RunConfig.RetryWait
	d         *httpDriver
	w         Workload
	rec       *result.Recorder
	take      func(time.Time) bool
	timeout   time.Duration
	conns     []*loopConn
	active    atomic.Int64
	idle      chan struct{} // closed when every client has stopped
	stop      chan struct{}
}

// runLoops drives the closed loop of cfg's clients through d's HTTP/1.1
// connections until ctx ends (or take refuses), then waits for the
// requests in flight.
func runLoops(ctx, waits context.Context, d *httpDriver, w Workload, cfg RunConfig, rec *result.Recorder, take func(time.Time) bool) {
	r := &loopRun{ctx: ctx, waits: waits, retryWait: cfg.RetryWait, d: d, w: w, rec: rec, take: take, timeout: cfg.OpTimeout,
		idle: make(chan struct{}), stop: make(chan struct{})}
	for _, l := range d.links {
		r.conns = append(r.conns, &loopConn{run: r, l: l, wake: make(chan struct{}, 1)})
	}
	var wg sync.WaitGroup
	for _, lc := range r.conns {
		wg.Add(1)
		go func() { defer wg.Done(); lc.writeLoop() }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.watchdog() }()
	r.active.Store(int64(cfg.Clients))
	for c := 0; c < cfg.Clients; c++ {
		cl := &loopClient{rng: rand.New(rand.NewSource(cfg.Seed + int64(c)*7919 + 1)), conn: c % cfg.Conns}
		r.issue(cl, nil)
	}
	<-r.idle
	close(r.stop)
	for _, lc := range r.conns {
		lc.mu.Lock()
		if lc.nc != nil {
			lc.nc.Close()
		}
		lc.mu.Unlock()
	}
	wg.Wait()
}

// dirty collects the connections a reader appended requests to; they are
// woken together once its buffered answers are taken.
type dirty []*loopConn

func (r *loopRun) done() {
	if r.active.Add(-1) == 0 {
		close(r.idle)
	}
}

// issue starts the client's next operation (or stops the client).
func (r *loopRun) issue(c *loopClient, dt *dirty) {
	now := time.Now()
	if r.ctx.Err() != nil || !r.take(now) {
		r.done()
		return
	}
	c.intended, c.sent, c.op, c.step = now, now, r.w.Next(c.rng), 0
	r.send(c, dt)
}

// key of the client's current request.
func (c *loopClient) key() []byte {
	return c.op.Key
}

// send queues the client's current request on the connection it goes to.
func (r *loopRun) send(c *loopClient, dt *dirty) {
	lc := r.conns[r.d.link(c.conn, c.key()).idx]
	lc.mu.Lock()
	if len(lc.sent) >= lc.l.depth {
		lc.wait = append(lc.wait, c)
		lc.mu.Unlock()
		return
	}
	lc.queueLocked(c)
	lc.mu.Unlock()
	if dt == nil {
		lc.signal()
	} else {
		*dt = append(*dt, lc)
	}
}

func (lc *loopConn) signal() {
	select {
	case lc.wake <- struct{}{}:
	default:
	}
}

// queueLocked appends c's current request to the connection's buffer.
func (lc *loopConn) queueLocked(c *loopClient) {
	if len(lc.sent) == 0 {
		lc.moved = time.Now()
	}
	lc.sent = append(lc.sent, c)
	method, body := http.MethodGet, []byte(nil)
	if c.op.Kind == KindPut || c.op.Kind == KindEntityPut || c.op.Kind == KindRMW && c.step == 1 {
		method, body = http.MethodPut, c.op.Value
	}
	b := append(lc.out, method...)
	b = append(b, ' ')
	switch c.op.Kind {
	case KindEntityPut, KindEntityGet:
		b = append(b, lc.run.d.entityURL(c.op.Key)...)
	case KindScan:
		b = append(b, lc.run.d.scanURL(c.op.Key, c.op.Limit)...)
	default:
		b = append(b, "/v1/kv/"...)
		b = appendPathEscape(b, c.key())
		if method == http.MethodGet && lc.run.d.c.Serializable {
			b = append(b, "?consistency=serializable"...)
		}
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, lc.l.addr...)
	if t := lc.run.d.c.Token; t != "" {
		b = append(b, "\r\nAuthorization: Bearer "...)
		b = append(b, t...)
	}
	if method == http.MethodPut {
		for _, h := range indexHeaders(c.op.Index) {
			b = append(b, "\r\n"...)
			b = append(b, h[0]...)
			b = append(b, ": "...)
			b = append(b, h[1]...)
		}
		b = append(b, "\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	lc.out = append(b, body...)
}

// appendPathEscape appends s as one path segment: bytes other than
// RFC 3986's unreserved ones percent-encoded.
func appendPathEscape(b, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range s {
		if http1.Unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// answered advances the client whose request got status at end.
func (r *loopRun) answered(c *loopClient, status int, end time.Time, dt *dirty) {
	err := statusError(status)
	// A refusal (503) is waited out and the request sent again
	// (retry.go); the loop reads no header, so the wait is the one the
	// nodes ask for, defaultRetryWait (or RunConfig.RetryWait).
	if wait, ok := retryWait(err, c.rng, r.retryWait); ok {
		r.rec.Refused(c.op.Name, c.intended)
		go func() {
			if !sleep(r.waits, wait) {
				r.done() // the run ended: the operation never completed
				return
			}
			c.sent = time.Now()
			r.send(c, nil)
		}()
		return
	}
	// A read-modify-write's read goes on past an absent key.
	more := err == nil || err == ErrNotFound
	switch c.op.Kind {
	case KindRMW:
		more = more && c.step == 0
		if c.step == 0 && err == ErrNotFound {
			err = nil
		}
	default:
		more = false
	}
	if more {
		c.step++
		r.send(c, dt)
		return
	}
	r.rec.RecordRetried(c.op.Name, c.intended, c.sent, end, err)
	r.issue(c, dt)
}

// fail ends the connection nc after err: its clients' operations fail
// with err and go on with their next ones (dialing again).
func (lc *loopConn) fail(nc net.Conn, err error) {
	lc.mu.Lock()
	if lc.nc != nc || nc == nil {
		lc.mu.Unlock()
		return
	}
	nc.Close()
	lc.nc = nil
	victims := lc.takeAllLocked()
	lc.mu.Unlock()
	lc.failClients(victims, err)
}

// takeAllLocked empties the connection of its requests and returns
// their clients.
func (lc *loopConn) takeAllLocked() []*loopClient {
	victims := append(lc.sent, lc.wait...)
	lc.sent, lc.wait, lc.out = nil, nil, lc.out[:0]
	return victims
}

func (lc *loopConn) failClients(victims []*loopClient, err error) {
	now := time.Now()
	for _, c := range victims {
		lc.run.rec.RecordRetried(c.op.Name, c.intended, c.sent, now, err)
		lc.run.issue(c, nil)
	}
}

// writeLoop writes the buffered requests whenever woken, dialing first
// when the connection is new or failed.
func (lc *loopConn) writeLoop() {
	var buf []byte
	for {
		select {
		case <-lc.wake:
		case <-lc.run.stop:
			return
		}
		lc.mu.Lock()
		nc := lc.nc
		if nc == nil && len(lc.sent) > 0 {
			lc.mu.Unlock()
			var err error
			if nc, err = lc.dial(); err != nil {
				lc.mu.Lock()
				victims := lc.takeAllLocked()
				lc.mu.Unlock()
				lc.failClients(victims, err)
				// Not at once again: its clients would only spin.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-lc.run.stop:
					return
				}
				continue
			}
			lc.mu.Lock()
			lc.nc = nc
			go lc.readLoop(nc)
		}
		buf, lc.out = lc.out, buf[:0]
		lc.mu.Unlock()
		if len(buf) == 0 || nc == nil {
			continue
		}
		if _, err := nc.Write(buf); err != nil {
			lc.fail(nc, err)
		}
	}
}

func (lc *loopConn) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := net.Dialer{KeepAlive: 30 * time.Second}
	if lc.l.tls != nil {
		cfg := lc.l.tls.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		if host, _, err := net.SplitHostPort(lc.l.addr); err == nil && cfg.ServerName == "" {
			cfg.ServerName = host
		}
		td := tls.Dialer{NetDialer: &d, Config: cfg}
		return td.DialContext(ctx, "tcp", lc.l.addr)
	}
	return d.DialContext(ctx, "tcp", lc.l.addr)
}

// readLoop takes nc's answers in order until it fails.
func (lc *loopConn) readLoop(nc net.Conn) {
	br := bufio.NewReaderSize(nc, 32<<10)
	var dt dirty
	for {
		if br.Buffered() == 0 {
			lc.wakeAll(&dt)
		}
		status, last, err := http1.ReadStatus(br)
		if err != nil {
			lc.wakeAll(&dt)
			lc.fail(nc, err)
			return
		}
		now := time.Now()
		lc.mu.Lock()
		if lc.nc != nc || len(lc.sent) == 0 {
			lc.mu.Unlock()
			lc.wakeAll(&dt)
			lc.fail(nc, errors.New("bench: answer without a request"))
			return
		}
		c := lc.sent[0]
		lc.sent[0] = nil
		lc.sent = lc.sent[1:]
		lc.moved = now
		if len(lc.wait) > 0 {
			w := lc.wait[0]
			lc.wait = lc.wait[1:]
			lc.queueLocked(w)
			dt = append(dt, lc)
		}
		lc.mu.Unlock()
		lc.run.answered(c, status, now, &dt)
		if last {
			lc.wakeAll(&dt)
			lc.fail(nc, http1.ErrConnClosed)
			return
		}
	}
}

func (lc *loopConn) wakeAll(dt *dirty) {
	for i, c := range *dt {
		c.signal()
		(*dt)[i] = nil
	}
	*dt = (*dt)[:0]
}

// watchdog fails a connection whose oldest request has gone unanswered
// for the operation timeout (a hung server or connection).
func (r *loopRun) watchdog() {
	t := time.NewTicker(min(r.timeout/4, 250*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-r.stop:
			return
		}
		now := time.Now()
		for _, lc := range r.conns {
			lc.mu.Lock()
			nc, stuck := lc.nc, len(lc.sent) > 0 && now.Sub(lc.moved) > r.timeout
			lc.mu.Unlock()
			if stuck {
				lc.fail(nc, context.DeadlineExceeded)
			}
		}
	}
}
