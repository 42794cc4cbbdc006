package http1

import (
	"bufio"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// writeLoop writes the answers in request order, flushing when the next
// one is not ready yet. Every write to the socket must finish within the
// write timeout. Once the connection is done for (a write failed or timed
// out, an answer closes it, a handler aborted) it only waits for the
// pending handlers to finish, dropping their answers.
func (c *conn) writeLoop(slots <-chan *slot, done chan<- struct{}) {
	defer close(done)
	bw := bufio.NewWriterSize(c.nc, 16<<10)
	broken := false
	end := func() {
		broken = true
		c.abort()
	}
	deadline := func() { _ = c.nc.SetWriteDeadline(time.Now().Add(c.s.writeTimeout())) }
	flush := func() {
		deadline()
		if bw.Flush() != nil {
			end()
		}
	}
	write := func(b []byte) bool {
		if len(b) > bw.Available() {
			deadline()
		}
		_, err := bw.Write(b)
		return err == nil
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
		case sl.head == nil && sl.close: // aborted handler
			end()
		case !write(sl.head) || !write(sl.body):
			end()
		case sl.close:
			flush()
			end()
		case len(slots) == 0 && bw.Buffered() > 0:
			flush()
		}
		c.written(sl)
		sl.head, sl.body = nil, nil
	}
	if !broken {
		flush()
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

// serialize renders the answer's head (status line, header fields with
// Content-Length, Date and Content-Type filled in as net/http does) and
// returns it with the body, which is not copied.
func (w *responseWriter) serialize(closeConn bool, minor int) (head, body []byte) {
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
	out := make([]byte, 0, 256)
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
	if len(w.body) <= 512 {
		// Small answers go out as one slice.
		return append(out, w.body...), nil
	}
	return out, w.body
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
