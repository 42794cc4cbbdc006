package http2

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// handle runs the handler of a stream.
func (c *conn) handle(st *stream) {
	req := st.req
	w := &responseWriter{c: c, st: st, header: make(http.Header, 4), head: req.Method == http.MethodHead}
	defer func() {
		c.s.giveBody(st.held)
		st.held = 0
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler && c.s.Logger != nil {
				c.s.Logger.Error("http2: handler panic", "method", req.Method, "uri", req.RequestURI, "panic", fmt.Sprint(p))
			}
			if w.sent || p == http.ErrAbortHandler {
				c.enqueue(&part{st: st, rst: http2.ErrCodeInternal, end: true})
			} else {
				h, body := c.s.rejection(http.StatusInternalServerError, "internal error")
				c.enqueue(&part{st: st, status: http.StatusInternalServerError, header: h, data: body, end: true})
			}
		}
		st.cancel()
	}()
	c.s.Handler.ServeHTTP(w, req)
	w.finish()
}

// responseWriter buffers an answer; a long one goes out in parts.
type responseWriter struct {
	c      *conn
	st     *stream
	header http.Header
	status int
	body   []byte
	head   bool
	// sniff: the start of a HEAD answer's body (never sent).
	sniff []byte
	// sent: the HEADERS went out (a part was written).
	sent bool
	err  error
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.head || bodyless(w.status) {
		if w.head && len(w.sniff) < 512 {
			// The Content-Type is still sniffed, as net/http does.
			w.sniff = append(w.sniff, p[:min(len(p), 512-len(w.sniff))]...)
		}
		return len(p), nil
	}
	w.body = append(w.body, p...)
	if len(w.body) >= partBytes {
		if err := w.sendPart(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush sends what is buffered (http.Flusher).
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = w.sendPart()
}

// sendPart writes the buffered part and waits until it is written.
func (w *responseWriter) sendPart() error {
	if w.err != nil {
		return w.err
	}
	p := &part{st: w.st, data: w.body, done: make(chan struct{})}
	if !w.sent {
		p.status, p.header = w.status, w.finalHeader(false)
		w.sent = true
	}
	w.c.enqueue(p)
	select {
	case <-p.done:
	case <-w.c.ctx.Done():
		w.err = errStreamGone
		return w.err
	}
	if p.err != nil {
		w.err = p.err
		return w.err
	}
	w.body = w.body[:0]
	return nil
}

func bodyless(status int) bool {
	return status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
}

// finalHeader fills Content-Length (whole: the answer is complete) and
// Content-Type as net/http does.
func (w *responseWriter) finalHeader(whole bool) http.Header {
	h := w.header
	switch {
	case bodyless(w.status):
		delete(h, "Content-Length")
	case whole && !w.head:
		h["Content-Length"] = []string{strconv.Itoa(len(w.body))}
	}
	if _, ok := h["Content-Type"]; !ok && len(w.body)+len(w.sniff) > 0 && !bodyless(w.status) {
		h["Content-Type"] = []string{http.DetectContentType(append(w.sniff, w.body...))}
	}
	return h
}

// finish queues the answer's last part.
func (w *responseWriter) finish() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	p := &part{st: w.st, data: w.body, end: true}
	if !w.sent {
		p.status, p.header = w.status, w.finalHeader(true)
		w.sent = true
	}
	w.c.enqueue(p)
}

// headerBlock encodes an answer's header fields.
func headerBlock(enc *hpack.Encoder, status int, h http.Header) {
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	for k, vs := range h {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade":
			continue
		}
		name := lower(k)
		for _, v := range vs {
			v = strings.Map(func(r rune) rune {
				if r == '\r' || r == '\n' {
					return ' '
				}
				return r
			}, v)
			_ = enc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
}

// lowerCache keeps the lower-case forms of up to 512 header names.
var (
	lowerCache sync.Map
	lowerCount atomic.Int32
)

func lower(k string) string {
	if v, ok := lowerCache.Load(k); ok {
		return v.(string)
	}
	l := strings.ToLower(k)
	if len(k) < 64 && lowerCount.Add(1) <= 512 {
		lowerCache.Store(k, l)
	}
	return l
}
