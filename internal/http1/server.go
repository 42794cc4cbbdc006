package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/deadline"
)

// Server serves HTTP/1.1 with pipelined requests handled concurrently, and
// hands HTTP/2 prior-knowledge connections to H2.
type Server struct {
	// Handler serves every HTTP/1.x request.
	Handler http.Handler
	// H2, if set, serves connections that open with the HTTP/2 preface
	// (it should enable only unencrypted HTTP/2); nil closes them.
	H2 *http.Server
	// MaxPipeline bounds the requests of one connection read but not yet
	// answered; the server stops reading the connection at the bound.
	// Default 128.
	MaxPipeline int
	// MaxBodyBytes: a request body over it is not read; the handler sees
	// its ContentLength (or, for a chunked body, a reader that yields more
	// than MaxBodyBytes) and the connection closes after the answer.
	// Default 8 MiB.
	MaxBodyBytes int64
	// MaxHeaderBytes bounds the request line and header fields. Default
	// 64 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading one request's head once its first
	// byte has arrived; IdleTimeout bounds the wait for the next request.
	// Defaults 10 s and 2 min.
	ReadHeaderTimeout, IdleTimeout time.Duration
	// RequestTimeout, if set, gives each request's context a deadline
	// RequestTimeout (plus at most a fiftieth of it, 100 ms at most)
	// after the request was read; the requests of one connection read
	// within that fiftieth share a context and its timer.
	RequestTimeout time.Duration
	// Reject writes the answer to a malformed request (its status is 400,
	// 413, 417, 431, 501 or 505); nil writes the message as plain text.
	Reject func(w http.ResponseWriter, status int, msg string)
	Logger *slog.Logger

	mu struct {
		sync.Mutex
		lis      []net.Listener
		conns    map[*conn]struct{}
		shutdown bool
	}
	h2lis *chanListener
	wg    sync.WaitGroup
	// work hands requests to idle handler goroutines.
	work chan func()
}

func (s *Server) maxPipeline() int {
	if s.MaxPipeline <= 0 {
		return 128
	}
	return s.MaxPipeline
}

func (s *Server) maxBody() int64 {
	if s.MaxBodyBytes <= 0 {
		return 8 << 20
	}
	return s.MaxBodyBytes
}

func (s *Server) maxHeader() int {
	if s.MaxHeaderBytes <= 0 {
		return 64 << 10
	}
	return s.MaxHeaderBytes
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout <= 0 {
		return 2 * time.Minute
	}
	return s.IdleTimeout
}

func (s *Server) headerTimeout() time.Duration {
	if s.ReadHeaderTimeout <= 0 {
		return 10 * time.Second
	}
	return s.ReadHeaderTimeout
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("http1: server closed")

// h2Preface opens every HTTP/2 connection (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Serve accepts connections on l until Shutdown or an accept error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.lis = append(s.mu.lis, l)
	if s.mu.conns == nil {
		s.mu.conns = map[*conn]struct{}{}
		s.work = make(chan func())
	}
	if s.H2 != nil && s.h2lis == nil {
		s.h2lis = &chanListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: l.Addr()}
		h2 := s.H2
		go func() { _ = h2.Serve(s.h2lis) }()
	}
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.shutdown
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		c := &conn{s: s, nc: nc}
		s.mu.Lock()
		if s.mu.shutdown {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, stops reading new requests, lets the
// requests already read finish and their answers be written, then closes
// every connection; when ctx ends first the rest are closed at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.mu.shutdown = true
	for _, l := range s.mu.lis {
		l.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	var h2err error
	if s.H2 != nil {
		h2err = s.H2.Shutdown(ctx)
		if s.h2lis != nil {
			s.h2lis.Close()
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return h2err
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

func (s *Server) logf(msg string, args ...any) {
	if s.Logger != nil {
		s.Logger.Debug(msg, args...)
	}
}

// conn is one client connection: a reader that parses requests and starts
// their handlers, and a writer that writes the answers in order.
type conn struct {
	s  *Server
	nc net.Conn
	// stopping: Shutdown asked the reader to stop.
	stopping atomic.Bool
	// linger: a request body was left unread.
	linger atomic.Bool
	remote string
	// ctx is every request's parent: canceled when the connection fails.
	ctx    context.Context
	cancel context.CancelFunc
	// deadlines hands out request contexts under ctx (nil: ctx itself).
	deadlines *deadline.Windows
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
	out  []byte
	// close: the connection closes after this answer.
	close bool
}

func (c *conn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.mu.conns, c)
		c.s.mu.Unlock()
	}()
	br := bufio.NewReaderSize(c.nc, 16<<10)
	// Sniff the HTTP/2 preface.
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.idleTimeout()))
	// "PRI " is no HTTP/1 method in use: it opens the HTTP/2 preface.
	if p, err := br.Peek(4); err == nil && string(p) == h2Preface[:4] {
		if c.s.H2 == nil || c.s.h2lis == nil {
			c.nc.Close()
			return
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		if !c.s.h2lis.hand(&bufConn{Conn: c.nc, r: br}) {
			c.nc.Close()
		}
		return
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	defer c.cancel()
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
		// A request body was left unread: read (and drop) what the client
		// is still sending for a moment, so closing does not reset the
		// connection before it has read the answer.
		_ = c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _ = io.CopyN(io.Discard, br, 16<<20)
	}
	c.nc.Close()
}

// readLoop parses requests until the connection ends, a request asks to
// close it, or a request is malformed.
func (c *conn) readLoop(br *bufio.Reader, slots chan<- *slot) {
	first := true
	for {
		if c.stopping.Load() {
			return
		}
		timeout := c.s.idleTimeout()
		if first {
			timeout = c.s.headerTimeout()
		}
		first = false
		_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
		if _, err := br.Peek(1); err != nil {
			c.readFailed(err)
			return
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.headerTimeout()))
		req, closeAfter, err := c.readRequest(br, slots)
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				c.s.logf("http1: bad request", "remote", c.remote, "err", err)
				sl := &slot{done: make(chan struct{}), close: true}
				sl.out = c.rejection(pe)
				close(sl.done)
				slots <- sl
				return
			}
			c.readFailed(err)
			return
		}
		sl := &slot{done: make(chan struct{}), close: closeAfter}
		slots <- sl // blocks while MaxPipeline answers are pending
		c.s.run(func() { c.handle(req, sl) })
		if closeAfter {
			return
		}
	}
}

// readFailed ends reading: a clean end (EOF, Shutdown, idle timeout) lets
// the pending requests finish; a broken connection cancels them.
func (c *conn) readFailed(err error) {
	var ne net.Error
	if errors.Is(err, io.EOF) || c.stopping.Load() || errors.As(err, &ne) && ne.Timeout() {
		return
	}
	c.cancel()
}

// readRequest reads one request: head, then body. closeAfter is true when
// the connection must close after its answer.
func (c *conn) readRequest(br *bufio.Reader, slots chan<- *slot) (req *http.Request, closeAfter bool, err error) {
	lr := &lineReader{br: br, budget: c.s.maxHeader()}
	var line []byte
	for {
		// RFC 9112 §2.2: ignore at least one empty line before a request.
		if line, err = lr.line(); err != nil {
			return nil, false, err
		}
		if len(line) > 0 {
			break
		}
	}
	m1 := bytes.IndexByte(line, ' ')
	m2 := bytes.LastIndexByte(line, ' ')
	if m1 <= 0 || m2 <= m1 {
		return nil, false, protoErr(http.StatusBadRequest, "malformed request line %q", truncate(line))
	}
	method, target, version := line[:m1], line[m1+1:m2], line[m2+1:]
	if !isToken(method) {
		return nil, false, protoErr(http.StatusBadRequest, "invalid method %q", truncate(method))
	}
	minor, ok := parseVersion(version)
	if !ok {
		if bytes.HasPrefix(version, []byte("HTTP/")) {
			return nil, false, protoErr(http.StatusHTTPVersionNotSupported, "unsupported version %q", truncate(version))
		}
		return nil, false, protoErr(http.StatusBadRequest, "malformed request line %q", truncate(line))
	}
	if len(target) == 0 || bytes.ContainsAny(target, " \t\x00") {
		return nil, false, protoErr(http.StatusBadRequest, "malformed request target")
	}
	// One allocation for the request and its context (WithContext copies).
	req = noRequest.WithContext(c.requestContext())
	req.Method = methodString(method)
	req.RequestURI = string(target)
	req.Proto = protoString(minor)
	req.ProtoMajor, req.ProtoMinor = 1, minor
	req.Header = make(http.Header, 8)
	req.RemoteAddr = c.remote
	if plainPath(target) {
		// What url.ParseRequestURI makes of it, without the parsing.
		req.URL = &url.URL{Path: req.RequestURI}
	} else if req.URL, err = url.ParseRequestURI(req.RequestURI); err != nil {
		return nil, false, protoErr(http.StatusBadRequest, "malformed request target: %v", err)
	}
	if err := lr.readHeader(req.Header); err != nil {
		return nil, false, err
	}
	hosts := req.Header["Host"]
	if len(hosts) > 1 || minor >= 1 && len(hosts) == 0 {
		return nil, false, protoErr(http.StatusBadRequest, "missing or repeated Host header")
	}
	if len(hosts) == 1 {
		req.Host = hosts[0]
	} else {
		req.Host = req.URL.Host
	}
	delete(req.Header, "Host")
	f, err := framing(req.Header)
	if err != nil {
		return nil, false, err
	}
	closeAfter = wantsClose(req.Header, minor)
	hasBody := f.chunked || f.length > 0
	if exp, ok := req.Header["Expect"]; ok {
		if len(exp) != 1 || !strings.EqualFold(exp[0], "100-continue") {
			return nil, false, protoErr(http.StatusExpectationFailed, "unsupported Expect %q", strings.Join(exp, ", "))
		}
		if hasBody && minor >= 1 && (f.chunked || f.length <= c.s.maxBody()) {
			// The interim answer goes out after every earlier answer.
			sl := &slot{done: make(chan struct{}), out: []byte("HTTP/1.1 100 Continue\r\n\r\n")}
			close(sl.done)
			slots <- sl
		}
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.idleTimeout()))
	body, over, err := readBody(br, f, c.s.maxBody())
	if err != nil {
		return nil, false, err
	}
	req.ContentLength = f.length
	switch {
	case over && f.chunked:
		// Longer than the limit: the handler reads limit+1 bytes and
		// answers 413; the rest of the body is never read.
		req.Body = io.NopCloser(io.LimitReader(zeroReader{}, c.s.maxBody()+1))
		req.ContentLength = -1
		closeAfter = true
		c.linger.Store(true)
	case over:
		req.Body = io.NopCloser(errReader{fmt.Errorf("http1: body of %d bytes not read (limit %d)", f.length, c.s.maxBody())})
		closeAfter = true
		c.linger.Store(true)
	case f.chunked:
		req.ContentLength = int64(len(body))
		req.Body = newBody(body)
	case len(body) > 0:
		req.Body = newBody(body)
	default:
		req.ContentLength = 0
		req.Body = http.NoBody
	}
	if f.chunked {
		req.TransferEncoding = []string{"chunked"}
	}
	req.Close = closeAfter
	return req, closeAfter, nil
}

// noRequest is the empty request each request starts as a copy of.
var noRequest http.Request

func protoString(minor int) string {
	if minor == 1 {
		return "HTTP/1.1"
	}
	return "HTTP/1." + strconv.Itoa(minor)
}

// plainPath reports whether a request target is an absolute path of
// unreserved characters only (RFC 3986 §2.3): no query, no escapes,
// nothing url.ParseRequestURI would change or reject.
func plainPath(t []byte) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	for _, c := range t {
		if c != '/' && !Unreserved(c) {
			return false
		}
	}
	return true
}

// Unreserved reports whether c is one of RFC 3986's unreserved characters
// (§2.3), which a URI carries as they are.
func Unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// Body is a request body read whole. Bytes gives it without a copy (for
// handlers that would read it into memory anyway); reading it works as
// for any body.
type Body struct {
	bytes.Reader
	b []byte
}

func newBody(b []byte) *Body {
	body := &Body{b: b}
	body.Reset(b)
	return body
}

// Bytes returns the whole body, whatever has been read of it.
func (b *Body) Bytes() []byte { return b.b }

// Close does nothing.
func (b *Body) Close() error { return nil }

var methods = map[string]string{}

func init() {
	for _, m := range []string{"GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH"} {
		methods[m] = m
	}
}

func methodString(b []byte) string {
	if m, ok := methods[string(b)]; ok {
		return m
	}
	return string(b)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// workerIdle: a handler goroutine waits this long for more work before
// it exits. Reusing goroutines saves growing a fresh stack per request.
const workerIdle = 10 * time.Second

// run runs f on an idle handler goroutine, or a new one.
func (s *Server) run(f func()) {
	select {
	case s.work <- f:
	default:
		go s.worker(f)
	}
}

// worker runs f and then what it is handed, until it was handed nothing
// for a whole workerIdle (it ends after one to two of them: its timer is
// not reset per request, which cost a timer operation each).
func (s *Server) worker(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		select {
		case f = <-s.work:
			continue
		case <-t.C:
		}
		// A workerIdle passed with work done in it: wait one more.
		t.Reset(workerIdle)
		select {
		case f = <-s.work:
		case <-t.C:
			return
		}
	}
}

// handle runs the handler for one request and fills its slot.
func (c *conn) handle(req *http.Request, sl *slot) {
	w := &responseWriter{header: make(http.Header, 4), head: req.Method == http.MethodHead}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				sl.close = true
				sl.out = nil
			} else {
				if c.s.Logger != nil {
					c.s.Logger.Error("http1: handler panic", "method", req.Method, "uri", req.RequestURI, "panic", fmt.Sprint(p))
				}
				w = &responseWriter{header: make(http.Header, 2)}
				c.reject(w, http.StatusInternalServerError, "internal error")
				sl.close = true
				sl.out = w.serialize(true, req.ProtoMinor)
			}
		}
		close(sl.done)
	}()
	c.s.Handler.ServeHTTP(w, req)
	sl.out = w.serialize(sl.close, req.ProtoMinor)
}

func (c *conn) reject(w http.ResponseWriter, status int, msg string) {
	if c.s.Reject != nil {
		c.s.Reject(w, status, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// rejection is the answer to a malformed request.
func (c *conn) rejection(pe *ProtocolError) []byte {
	w := &responseWriter{header: make(http.Header, 2)}
	c.reject(w, pe.Status, pe.Msg)
	return w.serialize(true, 1)
}

// writeLoop writes the answers in request order, flushing when the next
// one is not ready yet. Once the connection is done for (a write failed,
// an answer closes it, a handler aborted) it only waits for the pending
// handlers to finish.
func (c *conn) writeLoop(slots <-chan *slot, done chan<- struct{}) {
	defer close(done)
	bw := bufio.NewWriterSize(c.nc, 16<<10)
	broken := false
	end := func() {
		broken = true
		c.abort()
	}
	flush := func() {
		if bw.Flush() != nil {
			end()
		}
	}
	for sl := range slots {
		if !broken && !sl.ready() && bw.Buffered() > 0 {
			// Answers finish in bursts (one Raft entry resolves many
			// requests): give the next ones a moment to join this write
			// before flushing.
			runtime.Gosched()
			if !sl.ready() {
				flush()
			}
		}
		<-sl.done
		switch {
		case broken:
		case sl.out == nil && sl.close: // aborted handler
			end()
		case writeFailed(bw, sl.out):
			end()
		case sl.close:
			flush()
			end()
		case len(slots) == 0 && bw.Buffered() > 0:
			flush()
		}
	}
	if !broken {
		_ = bw.Flush()
	}
}

func (sl *slot) ready() bool { return closed(sl.done) }

// closed reports, without waiting, whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func writeFailed(bw *bufio.Writer, b []byte) bool {
	_, err := bw.Write(b)
	return err != nil
}

// abort stops reading and closes the write side; pending handlers still
// run to completion (their answers are discarded).
func (c *conn) abort() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}

// responseWriter buffers one answer.
type responseWriter struct {
	header http.Header
	status int
	body   []byte
	head   bool
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.head {
		w.body = append(w.body, p...)
	}
	return len(p), nil
}

// serialize renders the answer: status line, header fields (with
// Content-Length, Date and Content-Type filled in as net/http does), body.
func (w *responseWriter) serialize(closeConn bool, minor int) []byte {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	noBody := status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
	h := w.header
	switch {
	case noBody:
		delete(h, "Content-Length")
		w.body = nil
	case !w.head:
		h["Content-Length"] = []string{strconv.Itoa(len(w.body))}
	}
	// A HEAD answer keeps the Content-Length its handler set, if any.
	if _, ok := h["Content-Type"]; !ok && len(w.body) > 0 {
		h["Content-Type"] = []string{http.DetectContentType(w.body)}
	}
	out := make([]byte, 0, 128+len(w.body))
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(status), 10)
	out = append(out, ' ')
	out = append(out, statusText(status)...)
	out = append(out, "\r\nDate: "...)
	out = append(out, httpDate()...)
	out = append(out, "\r\n"...)
	for k, vs := range h {
		if k == "Date" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		for _, v := range vs {
			out = append(out, k...)
			out = append(out, ": "...)
			out = appendClean(out, v)
			out = append(out, "\r\n"...)
		}
	}
	switch {
	case closeConn:
		out = append(out, "Connection: close\r\n"...)
	case minor == 0:
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, "\r\n"...)
	return append(out, w.body...)
}

// appendClean appends a header value with CR and LF replaced by spaces
// (no answer splitting).
func appendClean(out []byte, v string) []byte {
	if !strings.ContainsAny(v, "\r\n") {
		return append(out, v...)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		out = append(out, c)
	}
	return out
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status " + strconv.Itoa(code)
}

// httpDate is the current time in the Date header's format, refreshed at
// most once a second.
func httpDate() string {
	now := time.Now().Unix()
	if d := dateCache.Load(); d != nil && d.unix == now {
		return d.text
	}
	d := &cachedDate{unix: now, text: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.text
}

type cachedDate struct {
	unix int64
	text string
}

var dateCache atomic.Pointer[cachedDate]

// bufConn is a connection whose first bytes were already buffered.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener hands sniffed HTTP/2 connections to the H2 server.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
