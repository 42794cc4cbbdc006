package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// ProtocolError is a malformed message: the server answers it with Status
// and closes the connection.
type ProtocolError struct {
	Status int
	Msg    string
}

func (e *ProtocolError) Error() string { return "http1: " + e.Msg }

func protoErr(status int, format string, args ...any) error {
	return &ProtocolError{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// maxHeaderLines bounds the header fields of one message.
const maxHeaderLines = 256

// lineReader reads CRLF (or LF) terminated lines with a budget of bytes.
type lineReader struct {
	br     *bufio.Reader
	budget int
}

// line returns the next line without its terminator. The slice is valid
// until the next read from br.
func (lr *lineReader) line() ([]byte, error) {
	l, err := lr.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, protoErr(http.StatusRequestHeaderFieldsTooLarge, "header line too long")
	}
	if err != nil {
		return nil, err
	}
	lr.budget -= len(l)
	if lr.budget < 0 {
		return nil, protoErr(http.StatusRequestHeaderFieldsTooLarge, "header too large")
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// readHeader reads header fields up to the empty line into h.
func (lr *lineReader) readHeader(h http.Header) error {
	for n := 0; ; n++ {
		l, err := lr.line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if len(l) == 0 {
			return nil
		}
		if n == maxHeaderLines {
			return protoErr(http.StatusRequestHeaderFieldsTooLarge, "more than %d header fields", maxHeaderLines)
		}
		if l[0] == ' ' || l[0] == '\t' {
			return protoErr(http.StatusBadRequest, "obsolete header line folding")
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 {
			return protoErr(http.StatusBadRequest, "malformed header line %q", truncate(l))
		}
		name := l[:colon]
		if !isToken(name) {
			return protoErr(http.StatusBadRequest, "invalid header name %q", truncate(name))
		}
		value := bytes.TrimFunc(l[colon+1:], isOWS)
		if bytes.ContainsAny(value, "\x00\r\n") {
			return protoErr(http.StatusBadRequest, "invalid character in header %q", name)
		}
		key := canonicalKey(name)
		h[key] = append(h[key], string(value))
	}
}

// commonKeys are canonical names of headers this package and Cairn's API
// read; looking them up saves an allocation per field.
var commonKeys = map[string]string{}

func init() {
	for _, k := range []string{"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
		"Expect", "If-Match", "If-None-Match", "Cairn-Request-Id", "User-Agent", "Accept", "Etag", "Date",
		"Retry-After", "Accept-Encoding", "Keep-Alive", "Server", "Allow", "Location"} {
		commonKeys[k] = k
		commonKeys[strings.ToLower(k)] = k
	}
}

func canonicalKey(name []byte) string {
	if k, ok := commonKeys[string(name)]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(string(name))
}

func isOWS(r rune) bool { return r == ' ' || r == '\t' }

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// isToken reports whether b is an RFC 9110 token (method, header name).
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// bodyFraming is how a message's body is delimited.
type bodyFraming struct {
	length  int64 // -1: not given
	chunked bool
}

// framing reads Content-Length and Transfer-Encoding. Both together are
// refused (a request smuggling vector); so are differing lengths and
// transfer codings other than chunked.
func framing(h http.Header) (bodyFraming, error) {
	f := bodyFraming{length: -1}
	if te, ok := h["Transfer-Encoding"]; ok {
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[0]), "chunked") {
			return f, protoErr(http.StatusNotImplemented, "unsupported Transfer-Encoding %q", strings.Join(te, ", "))
		}
		if _, ok := h["Content-Length"]; ok {
			return f, protoErr(http.StatusBadRequest, "both Transfer-Encoding and Content-Length")
		}
		f.chunked = true
		return f, nil
	}
	cl := h["Content-Length"]
	for _, v := range cl {
		n, err := parseLength(v)
		if err != nil {
			return f, err
		}
		if f.length >= 0 && n != f.length {
			return f, protoErr(http.StatusBadRequest, "differing Content-Length values")
		}
		f.length = n
	}
	return f, nil
}

func parseLength(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 18 {
		return 0, protoErr(http.StatusBadRequest, "bad Content-Length %q", s)
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, protoErr(http.StatusBadRequest, "bad Content-Length %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// readBody reads a body of the given framing, at most limit bytes of it.
// over is true when the body is longer than limit (then only limit+1 bytes
// were read and the rest is still on the connection).
func readBody(br *bufio.Reader, f bodyFraming, limit int64) (body []byte, over bool, err error) {
	switch {
	case f.chunked:
		return readChunked(br, limit)
	case f.length <= 0:
		return nil, false, nil
	case f.length > limit:
		return nil, true, nil
	}
	body = make([]byte, f.length)
	if _, err := io.ReadFull(br, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, err
	}
	return body, false, nil
}

// readChunked decodes a chunked body (RFC 9112 §7.1), ignoring chunk
// extensions and trailer fields.
func readChunked(br *bufio.Reader, limit int64) ([]byte, bool, error) {
	lr := &lineReader{br: br, budget: 64 << 10}
	var body []byte
	for {
		l, err := lr.line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i]
		}
		l = bytes.TrimRight(l, " \t")
		size, err := strconv.ParseUint(string(l), 16, 62)
		if err != nil || len(l) == 0 {
			return nil, false, protoErr(http.StatusBadRequest, "bad chunk size %q", truncate(l))
		}
		if size == 0 {
			// Trailer fields up to the empty line.
			if err := lr.readHeader(http.Header{}); err != nil {
				return nil, false, err
			}
			return body, false, nil
		}
		if int64(len(body))+int64(size) > limit {
			return nil, true, nil
		}
		start := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(br, body[start:]); err != nil {
			return nil, false, io.ErrUnexpectedEOF
		}
		crlf, err := lr.line()
		if err != nil || len(crlf) != 0 {
			return nil, false, protoErr(http.StatusBadRequest, "chunk not followed by CRLF")
		}
	}
}

// wantsClose reports whether a message's Connection header (and protocol
// version) asks to close the connection after it.
func wantsClose(h http.Header, minor int) bool {
	keepAlive := minor >= 1
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(tok)) {
			case "close":
				return true
			case "keep-alive":
				keepAlive = true
			}
		}
	}
	return !keepAlive
}

// parseVersion parses "HTTP/1.x".
func parseVersion(v []byte) (minor int, ok bool) {
	if len(v) != 8 || string(v[:7]) != "HTTP/1." || v[7] < '0' || v[7] > '9' {
		return 0, false
	}
	return int(v[7] - '0'), true
}
