package http1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// head is a parsed request head: the request (without its body), how its
// body is framed, and what it asks of the connection.
type head struct {
	req *http.Request
	f   bodyFraming
	// closeAfter: the connection closes after the answer.
	closeAfter bool
	// continue100: the client waits for 100 Continue before the body.
	continue100 bool
}

// readHead reads one request's line and header fields (RFC 9112 §2-§6)
// with at most maxHeader bytes of them, and checks Host, framing and
// Expect. The request's context is ctx.
func readHead(ctx context.Context, br *bufio.Reader, maxHeader int) (h head, err error) {
	lr := &lineReader{br: br, budget: maxHeader}
	// No empty lines before a request (RFC 9112 §2.2 allows ignoring
	// them; net/http refuses them, and so does this server).
	line, err := lr.line()
	if err != nil {
		return h, err
	}
	m1 := bytes.IndexByte(line, ' ')
	m2 := bytes.LastIndexByte(line, ' ')
	if m1 <= 0 || m2 <= m1 {
		return h, protoErr(http.StatusBadRequest, "malformed request line %q", truncate(line))
	}
	method, target, version := line[:m1], line[m1+1:m2], line[m2+1:]
	if !isToken(method) {
		return h, protoErr(http.StatusBadRequest, "invalid method %q", truncate(method))
	}
	if string(method) == http.MethodConnect {
		// No tunnels here (and net/http reads CONNECT's target otherwise).
		return h, protoErr(http.StatusNotImplemented, "CONNECT is not supported")
	}
	minor, ok := parseVersion(version)
	if !ok {
		if bytes.HasPrefix(version, []byte("HTTP/")) {
			return h, protoErr(http.StatusHTTPVersionNotSupported, "unsupported version %q", truncate(version))
		}
		return h, protoErr(http.StatusBadRequest, "malformed request line %q", truncate(line))
	}
	if len(target) == 0 || bytes.ContainsAny(target, " \t\x00") {
		return h, protoErr(http.StatusBadRequest, "malformed request target")
	}
	// One allocation for the request and its context (WithContext copies).
	req := noRequest.WithContext(ctx)
	req.Method = methodString(method)
	req.RequestURI = string(target)
	req.Proto = protoString(minor)
	req.ProtoMajor, req.ProtoMinor = 1, minor
	req.Header = make(http.Header, 8)
	if plainPath(target) {
		// What url.ParseRequestURI makes of it, without the parsing.
		req.URL = &url.URL{Path: req.RequestURI}
	} else if req.URL, err = url.ParseRequestURI(req.RequestURI); err != nil {
		return h, protoErr(http.StatusBadRequest, "malformed request target: %v", err)
	}
	fr := framer{minor: minor, request: true}
	if err := lr.readHeader(req.Header, &fr); err != nil {
		return h, err
	}
	hosts := req.Header["Host"]
	if len(hosts) > 1 || minor >= 1 && len(hosts) == 0 {
		return h, protoErr(http.StatusBadRequest, "missing or repeated Host header")
	}
	if len(hosts) == 1 {
		req.Host = hosts[0]
	} else {
		req.Host = req.URL.Host
	}
	delete(req.Header, "Host")
	if h.f, h.closeAfter, err = fr.result(); err != nil {
		return h, err
	}
	if exp, ok := req.Header["Expect"]; ok {
		if len(exp) != 1 || !strings.EqualFold(exp[0], "100-continue") {
			return h, protoErr(http.StatusExpectationFailed, "unsupported Expect %q", strings.Join(exp, ", "))
		}
		h.continue100 = minor >= 1 && (h.f.chunked || h.f.length > 0)
	}
	h.req = req
	return h, nil
}

// readRequest reads one request: head, then body. held is the body's
// share of the server's body budget (to give back when the request is
// answered); closeAfter is true when the connection must close after
// its answer.
func (c *conn) readRequest(br *bufio.Reader, slots chan<- *slot) (req *http.Request, held int64, closeAfter bool, err error) {
	h, err := readHead(c.requestContext(), br, c.s.maxHeader())
	if err != nil {
		return nil, 0, false, err
	}
	req, f, closeAfter := h.req, h.f, h.closeAfter
	req.RemoteAddr = c.remote
	limit := c.s.maxBody()
	if h.continue100 && (f.chunked || f.length <= limit) {
		// The interim answer goes out after every earlier answer.
		sl := &slot{done: make(chan struct{}), head: []byte("HTTP/1.1 100 Continue\r\n\r\n")}
		close(sl.done)
		c.queue(slots, sl)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.idleTimeout()))
	body, held, err := readBody(br, f, limit, &c.s.bodies)
	if err != nil {
		return nil, 0, false, err
	}
	req.ContentLength = f.length
	switch {
	case body == nil && f.length > limit:
		// Longer than the limit: left unread; the handler answers (413).
		req.Body = io.NopCloser(errReader{fmt.Errorf("%w: body of %d bytes not read (limit %d)", ErrBodyTooLarge, f.length, limit)})
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
	return req, held, closeAfter, nil
}

// noRequest is the empty request each request starts as a copy of.
var noRequest http.Request

func protoString(minor int) string {
	if minor == 1 {
		return "HTTP/1.1"
	}
	return "HTTP/1." + strconv.Itoa(minor)
}

// parseVersion parses "HTTP/1.x".
func parseVersion(v []byte) (minor int, ok bool) {
	if len(v) != 8 || string(v[:7]) != "HTTP/1." || v[7] < '0' || v[7] > '9' {
		return 0, false
	}
	return int(v[7] - '0'), true
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

// Body is a request body read whole. Bytes gives it without a copy (for
// handlers that would read it into memory anyway); reading it works as
// for any body.
type Body struct {
	bytes.Reader
	b []byte
}

// NewBody is a Body holding b (for other servers handing whole bodies to
// the same handlers).
func NewBody(b []byte) *Body { return newBody(b) }

func newBody(b []byte) *Body {
	body := &Body{b: b}
	body.Reset(b)
	return body
}

// Bytes returns the whole body, whatever has been read of it.
func (b *Body) Bytes() []byte { return b.b }

// Close does nothing.
func (b *Body) Close() error { return nil }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
