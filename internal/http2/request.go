package http2

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cairn-db/cairn/internal/http1"
	"golang.org/x/net/http2"
)

// request builds a stream's request from its header fields.
func (c *conn) request(ctx context.Context, f *http2.MetaHeadersFrame) (*http.Request, error) {
	var method, path, authority, scheme string
	header := make(http.Header, len(f.Fields))
	for _, hf := range f.Fields {
		if hf.IsPseudo() {
			switch hf.Name {
			case ":method":
				method = hf.Value
			case ":path":
				path = hf.Value
			case ":authority":
				authority = hf.Value
			case ":scheme":
				scheme = hf.Value
			default:
				return nil, fmt.Errorf("pseudo-header %q", hf.Name)
			}
			continue
		}
		k := http.CanonicalHeaderKey(hf.Name)
		if k == "Cookie" && len(header[k]) > 0 {
			header[k][0] += "; " + hf.Value
			continue
		}
		header[k] = append(header[k], hf.Value)
	}
	if method == "" || method == http.MethodConnect || path == "" || scheme == "" {
		return nil, errors.New("missing pseudo-header")
	}
	for _, k := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"} {
		if _, ok := header[k]; ok {
			return nil, errors.New("connection-specific header field")
		}
	}
	if te := header["Te"]; len(te) > 0 && (len(te) > 1 || te[0] != "trailers") {
		return nil, errors.New("te other than trailers")
	}
	if authority == "" {
		authority = header.Get("Host")
	}
	delete(header, "Host")
	var u *url.URL
	var err error
	if plainPath(path) {
		// What url.ParseRequestURI makes of it, without the parsing.
		u = &url.URL{Path: path}
	} else if u, err = url.ParseRequestURI(path); err != nil {
		return nil, err
	}
	req := noRequest.WithContext(ctx)
	req.Method = method
	req.URL = u
	req.RequestURI = path
	req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
	req.Header = header
	req.Host = authority
	req.RemoteAddr = c.remote
	req.TLS = c.tls
	req.ContentLength = -1
	if cl := header["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			req.ContentLength = n
		}
	}
	return req, nil
}

var noRequest http.Request

// plainPath reports whether a request target is an absolute path of RFC
// 3986's unreserved characters and slashes only (no query, no escapes).
func plainPath(t string) bool {
	if t == "" || t[0] != '/' {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c != '/' && !http1.Unreserved(c) {
			return false
		}
	}
	return true
}

// data adds a DATA frame's payload to its stream's body.
func (c *conn) data(f *http2.DataFrame) error {
	n := int64(f.Length) // with padding: all of it counts
	if n > c.recvConn {
		return connErr(http2.ErrCodeFlowControl)
	}
	c.recvConn -= n
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.lastID || f.StreamID%2 == 0 {
			return connErr(http2.ErrCodeProtocol)
		}
		c.giveBack(0, n)
		c.resetStream(f.StreamID, http2.ErrCodeStreamClosed)
		return nil
	}
	if n > st.recv {
		c.giveBack(0, n)
		c.resetStream(st.id, http2.ErrCodeFlowControl)
		return nil
	}
	st.recv -= n
	p := f.Data()
	switch {
	case st.refused:
	case int64(len(st.body)+len(p)) > c.s.maxBody():
		st.refused = true
		c.answer(st, http.StatusRequestEntityTooLarge, "request body too large", false)
	case !c.s.takeBody(int64(len(p))):
		st.refused = true
		c.answer(st, http.StatusServiceUnavailable, "server busy: too many request bodies held", false)
	default:
		st.held += int64(len(p))
		st.body = append(st.body, p...)
	}
	c.giveBack(st.id, n)
	if f.StreamEnded() {
		c.endStream(st)
	}
	return nil
}
