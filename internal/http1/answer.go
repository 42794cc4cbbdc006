package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ReadStatus reads one final answer from br (skipping interim 1xx ones)
// and discards its body, keeping only its status: for a load generator
// that counts answers, without Conn's header map and body copy. last
// reports that the connection carries no further answers (the server
// asked to close it, or the body ran to the connection's end). An answer
// to a HEAD request has no body and cannot be told apart; do not use
// ReadStatus for those.
func ReadStatus(br *bufio.Reader) (status int, last bool, err error) {
	for {
		lr := &lineReader{br: br, budget: 1 << 20}
		line, err := lr.line()
		if err != nil {
			return 0, false, err
		}
		if status, err = parseStatusLine(line); err != nil {
			return 0, false, err
		}
		if status < 100 {
			return 0, false, fmt.Errorf("malformed status line %q", truncate(line))
		}
		minor := int(line[7] - '0')
		f, closeConn, err := lr.answerFraming(minor)
		if err != nil {
			return 0, false, err
		}
		if status < 200 {
			continue
		}
		if status == http.StatusNoContent || status == http.StatusNotModified {
			return status, closeConn, nil
		}
		switch {
		case f.chunked:
			_, over, err := readChunked(br, maxResponseBody)
			if err == nil && over {
				err = fmt.Errorf("answer body over %d bytes", maxResponseBody)
			}
			return status, closeConn, err
		case f.length < 0:
			// Delimited by the connection's end.
			_, err := io.Copy(io.Discard, io.LimitReader(br, maxResponseBody))
			return status, true, err
		}
		if _, err := br.Discard(int(f.length)); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, err
		}
		return status, closeConn, nil
	}
}

// answerFraming reads an answer's header fields up to the empty line,
// keeping only its body's framing (with framing's rules) and whether it
// closes the connection (wantsClose's); other fields are only checked for
// form.
func (lr *lineReader) answerFraming(minor int) (f bodyFraming, closeConn bool, err error) {
	f.length = -1
	keepAlive := minor >= 1
	var te, cl bool
	for n := 0; ; n++ {
		l, err := lr.line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return f, false, err
		}
		if len(l) == 0 {
			break
		}
		if n == maxHeaderLines {
			return f, false, protoErr(http.StatusRequestHeaderFieldsTooLarge, "more than %d header fields", maxHeaderLines)
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || !isToken(l[:colon]) {
			return f, false, protoErr(http.StatusBadRequest, "malformed header line %q", truncate(l))
		}
		name, value := l[:colon], bytes.TrimFunc(l[colon+1:], isOWS)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := parseLength(string(value))
			if err != nil {
				return f, false, err
			}
			if cl && n != f.length {
				return f, false, protoErr(http.StatusBadRequest, "differing Content-Length values")
			}
			cl, f.length = true, n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if te || !bytes.EqualFold(value, []byte("chunked")) {
				return f, false, protoErr(http.StatusNotImplemented, "unsupported Transfer-Encoding %q", truncate(value))
			}
			te = true
		case bytes.EqualFold(name, []byte("Connection")):
			for _, tok := range bytes.Split(value, []byte(",")) {
				switch tok = bytes.TrimFunc(tok, isOWS); {
				case bytes.EqualFold(tok, []byte("close")):
					closeConn = true
				case bytes.EqualFold(tok, []byte("keep-alive")):
					keepAlive = true
				}
			}
		}
	}
	if te && cl {
		return f, false, protoErr(http.StatusBadRequest, "both Transfer-Encoding and Content-Length")
	}
	if te {
		f.chunked, f.length = true, -1
	}
	return f, closeConn || !keepAlive, nil
}
