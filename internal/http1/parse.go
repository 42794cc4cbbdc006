package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// ProtocolError is a malformed message: the server answers it with Status
// and closes the connection.
type ProtocolError struct {
	Status int
	Msg    string
	// Err, if set, is the sentinel error the message stands for
	// (ErrBodyTooLarge, ErrBodyBudget).
	Err error
}

func (e *ProtocolError) Error() string { return "http1: " + e.Msg }

func (e *ProtocolError) Unwrap() error { return e.Err }

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

// readHeader reads header fields up to the empty line into h (nil: only
// check their form), handing each to fr (nil: none).
func (lr *lineReader) readHeader(h http.Header, fr *framer) error {
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
		if !validValue(value) {
			return protoErr(http.StatusBadRequest, "invalid character in header %q", name)
		}
		if fr != nil {
			if err := fr.field(name, value); err != nil {
				return err
			}
		}
		if h != nil {
			key := canonicalKey(name)
			h[key] = append(h[key], string(value))
		}
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

// validValue reports whether v is a header field value of visible
// characters, spaces, tabs and obs-text (RFC 9110 §5.5): no control
// characters.
func validValue(v []byte) bool {
	for _, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
