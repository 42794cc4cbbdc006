package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
)

var (
	// ErrBodyTooLarge: a body longer than the limit (MaxBodyBytes) was
	// not read.
	ErrBodyTooLarge = errors.New("http1: body too large")
	// ErrBodyBudget: the server holds its BodyBudget of request bodies.
	ErrBodyBudget = errors.New("http1: request body budget used up")
)

// bodyFraming is how a message's body is delimited.
type bodyFraming struct {
	length  int64 // -1: not given
	chunked bool
}

// framer gathers, field by field, the header fields that frame a message
// (Content-Length, Transfer-Encoding) and keep or close its connection
// (Connection), for requests and answers alike (RFC 9112 §6, §9.3).
type framer struct {
	minor int
	// request: a request (a Transfer-Encoding on HTTP/1.0 is refused).
	request bool

	length    int64
	clText    string // the first Content-Length as written
	cl, te    bool
	closeConn bool
	keepAlive bool
}

// field takes one header field.
func (fr *framer) field(name, value []byte) error {
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		if fr.cl {
			// A repeated Content-Length must repeat the value as written
			// ("5" and "05" differ), as net/http requires.
			if string(value) != fr.clText {
				return protoErr(http.StatusBadRequest, "differing Content-Length values")
			}
			return nil
		}
		n, err := parseLength(value)
		if err != nil {
			return err
		}
		fr.cl, fr.length, fr.clText = true, n, string(value)
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		// Only "chunked", once: a list of codings or a repeated field is
		// refused as net/http does.
		if fr.te || !bytes.EqualFold(value, []byte("chunked")) {
			return protoErr(http.StatusNotImplemented, "unsupported Transfer-Encoding %q", truncate(value))
		}
		fr.te = true
	case bytes.EqualFold(name, []byte("Connection")):
		for _, tok := range bytes.Split(value, []byte(",")) {
			switch tok = bytes.TrimFunc(tok, isOWS); {
			case bytes.EqualFold(tok, []byte("close")):
				fr.closeConn = true
			case bytes.EqualFold(tok, []byte("keep-alive")):
				fr.keepAlive = true
			}
		}
	}
	return nil
}

// result is the message's framing, once all its fields were taken, and
// whether the connection closes after it. Transfer-Encoding together with
// Content-Length is refused (a request smuggling vector, RFC 9112 §6.3),
// and so is a Transfer-Encoding in an HTTP/1.0 request (which net/http
// would ignore, framing the body differently).
func (fr *framer) result() (f bodyFraming, closeConn bool, err error) {
	f.length = -1
	switch {
	case fr.te && fr.cl:
		return f, false, protoErr(http.StatusBadRequest, "both Transfer-Encoding and Content-Length")
	case fr.te && fr.request && fr.minor == 0:
		return f, false, protoErr(http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request")
	case fr.te:
		f.chunked = true
	case fr.cl:
		f.length = fr.length
	}
	return f, fr.closeConn || !(fr.minor >= 1 || fr.keepAlive), nil
}

// parseLength parses a Content-Length value: decimal digits only, below
// 2^63.
func parseLength(s []byte) (int64, error) {
	if len(s) == 0 {
		return 0, protoErr(http.StatusBadRequest, "bad Content-Length %q", truncate(s))
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, protoErr(http.StatusBadRequest, "bad Content-Length %q", truncate(s))
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// byteBudget counts bytes held against a limit, for many goroutines.
type byteBudget struct {
	used  atomic.Int64
	limit int64 // 0: no limit
}

// take reserves n bytes; false when that would pass the limit.
func (b *byteBudget) take(n int64) bool {
	if b == nil || b.limit == 0 {
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give returns n bytes taken.
func (b *byteBudget) give(n int64) {
	if b != nil && b.limit != 0 && n != 0 {
		b.used.Add(-n)
	}
}

// minGrow is the first allocation of a body and its least growth.
const minGrow = 16 << 10

// bodyBuf collects a body as its bytes arrive: it grows (doubling, or to
// the bytes still announced when fewer) only when full, so the memory it
// holds is at most twice what arrived plus minGrow, never what a header
// announced. Every byte of capacity is taken from budget first.
type bodyBuf struct {
	buf    []byte
	budget *byteBudget
	held   int64
}

// readN appends n more bytes read from br; limit bounds the body's size
// (the capacity never passes it; callers keep n within it).
func (b *bodyBuf) readN(br *bufio.Reader, n, limit int64) error {
	for n > 0 {
		if len(b.buf) == cap(b.buf) {
			// Grow only once a byte is there to fill it.
			if _, err := br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			if err := b.grow(min(max(int64(cap(b.buf)), minGrow), limit-int64(len(b.buf)))); err != nil {
				return err
			}
		}
		room := b.buf[len(b.buf):min(int64(cap(b.buf)), int64(len(b.buf))+n)]
		k, err := br.Read(room)
		b.buf = b.buf[:len(b.buf)+k]
		n -= int64(k)
		if err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow adds by bytes of capacity (at least one).
func (b *bodyBuf) grow(by int64) error {
	by = max(by, 1)
	if !b.budget.take(by) {
		return ErrBodyBudget
	}
	b.held += by // the old buffer's bytes pass to the new one
	nb := make([]byte, len(b.buf), int64(cap(b.buf))+by)
	copy(nb, b.buf)
	b.buf = nb
	return nil
}

// release gives back what the buffer holds of the budget.
func (b *bodyBuf) release() {
	b.budget.give(b.held)
	b.held = 0
}

// readBody reads a body of the given framing, at most limit bytes of it,
// allocating as its bytes arrive and taking them from budget (nil: no
// budget). A body with a Content-Length over limit is not read (body is
// nil); a chunked one over it is refused with 413 as soon as a chunk
// passes the limit. held is the share of budget the body holds, to give
// back once it is no longer needed; on an error nothing is held.
func readBody(br *bufio.Reader, f bodyFraming, limit int64, budget *byteBudget) (body []byte, held int64, err error) {
	b := bodyBuf{budget: budget}
	switch {
	case f.chunked:
		err = readChunked(br, &b, limit)
	case f.length <= 0 || f.length > limit:
		return nil, 0, nil
	default:
		err = b.readN(br, f.length, f.length)
	}
	if err != nil {
		b.release()
		if errors.Is(err, ErrBodyBudget) {
			err = &ProtocolError{Status: http.StatusServiceUnavailable, Msg: "too many request bodies in flight", Err: err}
		}
		return nil, 0, err
	}
	return b.buf, b.held, nil
}

// maxChunkLine bounds a chunk-size line (with its extensions), and
// maxChunkOverhead the bytes of chunk lines beyond 16 per chunk and twice
// its data (extensions that carry more than data), as net/http does.
const (
	maxChunkLine     = 4096
	maxChunkOverhead = 16 << 10
)

// readChunked decodes a chunked body (RFC 9112 §7.1) into b, ignoring
// chunk extensions and trailer fields. Chunk lines end in CRLF (no bare
// LF, errata 7633); whitespace is allowed only before the line's end.
func readChunked(br *bufio.Reader, b *bodyBuf, limit int64) error {
	var overhead int64
	for {
		l, err := chunkLine(br)
		if err != nil {
			return err
		}
		overhead += int64(len(l)) + 2
		l = bytes.TrimRight(l, " \t")
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i]
		}
		size, ok := parseHex(l)
		if !ok {
			return protoErr(http.StatusBadRequest, "bad chunk size %q", truncate(l))
		}
		if overhead = max(overhead-16-2*int64(size), 0); overhead > maxChunkOverhead {
			return protoErr(http.StatusBadRequest, "chunked encoding with too much non-data")
		}
		if size == 0 {
			return readTrailer(br)
		}
		if size > uint64(limit-int64(len(b.buf))) {
			return &ProtocolError{Status: http.StatusRequestEntityTooLarge, Err: ErrBodyTooLarge,
				Msg: "chunked body over the limit of " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		if err := b.readN(br, int64(size), limit); err != nil {
			return err
		}
		crlf, err := br.Peek(2)
		if err != nil || string(crlf) != "\r\n" {
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			return protoErr(http.StatusBadRequest, "chunk not followed by CRLF")
		}
		_, _ = br.Discard(2)
	}
}

// chunkLine reads a line that ends in CRLF, without it.
func chunkLine(br *bufio.Reader) ([]byte, error) {
	l, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, io.EOF):
		return nil, io.ErrUnexpectedEOF
	case errors.Is(err, bufio.ErrBufferFull) || len(l) > maxChunkLine:
		return nil, protoErr(http.StatusBadRequest, "chunk line too long")
	case err != nil:
		return nil, err
	}
	if len(l) < 2 || bytes.IndexByte(l, '\r') != len(l)-2 {
		return nil, protoErr(http.StatusBadRequest, "chunk line not ended by CRLF")
	}
	return l[:len(l)-2], nil
}

// readTrailer reads the trailer section after the last chunk: fields of
// the header's form, each line ending in CRLF, up to an empty line, in at
// most maxChunkLine bytes (net/http's bound, its reader's buffer).
func readTrailer(br *bufio.Reader) error {
	budget := maxChunkLine
	for {
		l, err := chunkLine(br)
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				pe.Msg = "trailer: " + pe.Msg
			}
			return err
		}
		if budget -= len(l) + 2; budget < 0 {
			return protoErr(http.StatusRequestHeaderFieldsTooLarge, "trailer section too large")
		}
		if len(l) == 0 {
			return nil
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || !isToken(l[:colon]) || !validValue(bytes.TrimFunc(l[colon+1:], isOWS)) {
			return protoErr(http.StatusBadRequest, "malformed trailer field %q", truncate(l))
		}
	}
}

// parseHex parses a chunk size: 1 to 16 hex digits, nothing else.
func parseHex(v []byte) (n uint64, ok bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	for _, c := range v {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	return n, true
}
