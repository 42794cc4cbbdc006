package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// parsed is what matters of the first request of a byte stream.
type parsed struct {
	method, target string
	length         int64 // Content-Length; -1: chunked
	body           string
	consumed       int // bytes of the stream the request took
}

// fuzzBodyLimit is the body limit the differential test parses with.
const fuzzBodyLimit = 1 << 20

// ourParse reads the first request of data as this server does.
func ourParse(data []byte) (parsed, error) {
	r := bytes.NewReader(data)
	br := bufio.NewReaderSize(r, 16<<10)
	h, err := readHead(context.Background(), br, 64<<10)
	if err != nil {
		return parsed{}, err
	}
	if !h.f.chunked && h.f.length > fuzzBodyLimit {
		return parsed{}, ErrBodyTooLarge
	}
	body, _, err := readBody(br, h.f, fuzzBodyLimit, nil)
	if err != nil {
		return parsed{}, err
	}
	p := parsed{method: h.req.Method, target: h.req.RequestURI, length: max(h.f.length, 0), body: string(body)}
	if h.f.chunked {
		p.length = -1
	}
	p.consumed = len(data) - r.Len() - br.Buffered()
	return p, nil
}

// netParse reads the first request of data with net/http.
func netParse(data []byte) (parsed, *http.Request, error) {
	r := bytes.NewReader(data)
	br := bufio.NewReader(r)
	req, err := http.ReadRequest(br)
	if err != nil {
		return parsed{}, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, fuzzBodyLimit+1))
	if err != nil {
		return parsed{}, req, err
	}
	if len(body) > fuzzBodyLimit {
		return parsed{}, req, ErrBodyTooLarge
	}
	p := parsed{method: req.Method, target: req.RequestURI, length: req.ContentLength, body: string(body)}
	if len(req.TransferEncoding) > 0 {
		p.length = -1
	}
	p.consumed = len(data) - r.Len() - br.Buffered()
	return p, req, nil
}

// stricter reports why this server may refuse a request net/http
// accepts: the documented cases where it is deliberately stricter.
// Everything else net/http accepts, it must accept alike.
func stricter(err error, req *http.Request) (string, bool) {
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		return "", false
	}
	switch {
	case strings.Contains(pe.Msg, "missing or repeated Host header"):
		return "HTTP/1.1 without Host (net/http's server refuses it too)", req.ProtoMinor >= 1 && len(req.Header["Host"]) == 0
	case strings.Contains(pe.Msg, "both Transfer-Encoding and Content-Length"):
		return "Transfer-Encoding with Content-Length (net/http drops the length)", true
	case strings.Contains(pe.Msg, "Transfer-Encoding in an HTTP/1.0 request"),
		strings.Contains(pe.Msg, "unsupported Transfer-Encoding") && req.ProtoMinor == 0:
		return "Transfer-Encoding in HTTP/1.0 (net/http ignores it)", req.ProtoMinor == 0
	case strings.Contains(pe.Msg, "obsolete header line folding"):
		return "obs-fold (net/http joins the lines)", true
	case strings.HasPrefix(pe.Msg, "trailer: ") || strings.Contains(pe.Msg, "malformed trailer field"):
		return "trailer lines that do not end in CRLF or are not fields (net/http reads MIME header lines)", true
	case pe.Status == http.StatusExpectationFailed:
		return "Expect other than 100-continue (net/http's server answers 417 too)", true
	case pe.Status == http.StatusRequestHeaderFieldsTooLarge:
		return "header limits (net/http's reader has none; its server 1 MiB)", true
	case pe.Status == http.StatusHTTPVersionNotSupported:
		return "versions other than HTTP/1.x (net/http's server refuses them too)", req.ProtoMajor != 1
	case strings.Contains(pe.Msg, "invalid header name") || strings.Contains(pe.Msg, "malformed header line"):
		return "header names that are not tokens (net/http keeps some, such as a space before the colon)", true
	case strings.Contains(pe.Msg, "CONNECT is not supported"):
		return "CONNECT (no tunnels)", req.Method == http.MethodConnect
	}
	return "", false
}

// FuzzParseDifferential feeds the same bytes to this package's request
// parser and to net/http's ReadRequest (and body reading): both must
// agree on accepting the first request, its method and target, its
// framing, its body and how many bytes of the stream it took (request
// smuggling lives in the differences). This parser may refuse what
// net/http accepts only in the cases stricter lists.
func FuzzParseDifferential(f *testing.F) {
	for _, s := range smugglingSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ours, ourErr := ourParse(data)
		theirs, req, netErr := netParse(data)
		switch {
		case ourErr == nil && netErr != nil:
			t.Fatalf("accepted what net/http refuses (%v): %+v\n%q", netErr, ours, data)
		case ourErr != nil && netErr == nil:
			if why, ok := stricter(ourErr, req); !ok {
				t.Fatalf("refused what net/http accepts (%v; %q): %+v\n%q", ourErr, why, theirs, data)
			}
		case ourErr == nil && ours != theirs:
			t.Fatalf("differs from net/http:\nours %+v\nnet  %+v\n%q", ours, theirs, data)
		}
	})
}

// smugglingSeeds are requests whose framing front ends and back ends have
// been known to disagree on, and plain ones to mutate from.
var smugglingSeeds = []string{
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /a?b=c HTTP/1.0\r\n\r\n",
	"PUT /v1/kv/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: v\r\n\r\n",
	// CL.TE and TE.CL.
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
	// Obfuscated Transfer-Encoding.
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\n1\r\nZ\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	// Duplicate and odd Content-Length.
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 03\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
	// Bare LF and CR.
	"GET / HTTP/1.1\nHost: x\n\n",
	"POST / HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n",
	"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	// Chunk extensions, sizes and trailers.
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3 ;a=b\r\nabc\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a=\"b;c\"\r\nabc\r\n0 \r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000000003\r\nabc\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\nY: b\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 5000) + "\r\nx\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1;"+strings.Repeat("e", 100)+"\r\nx\r\n", 200) + "0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + strings.Repeat("t", 5000) + "\r\n\r\n",
	// Header limits, request lines, versions.
	"GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X: a\r\n", 300) + "\r\n",
	"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
	"GET / HTTP/1.2\r\nHost: x\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
	"GET http://h/p HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET http://h/p HTTP/1.1\r\n\r\n",
	"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX: \xffb\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
}
