package http1

import (
	"bufio"
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
		fr := framer{minor: minor}
		if err := lr.readHeader(nil, &fr); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, err
		}
		f, closeConn, err := fr.result()
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
			_, _, err := readBody(br, f, maxResponseBody, nil)
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
