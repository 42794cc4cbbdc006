package http1

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadStatus(t *testing.T) {
	type answer struct {
		status int
		last   bool
	}
	cases := []struct {
		name string
		in   string
		want []answer // in order; then the input must be used up
		err  string   // the error of the answer after want
	}{
		{name: "lengths and keep-alive", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
			want: []answer{{200, false}, {404, false}}},
		{name: "chunked", in: "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
			want: []answer{{503, false}, {204, false}}},
		{name: "interim answer skipped", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
			want: []answer{{201, false}}},
		{name: "close", in: "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
			want: []answer{{200, true}}},
		{name: "HTTP/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
			want: []answer{{200, true}}},
		{name: "HTTP/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
			want: []answer{{200, false}}},
		{name: "body to the end", in: "HTTP/1.1 200 OK\r\n\r\nall of it",
			want: []answer{{200, true}}},
		{name: "both framings", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", err: "both"},
		{name: "differing lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", err: "differing"},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "Content-Length"},
		{name: "gzip", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: "Transfer-Encoding"},
		{name: "status line", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: "status line"},
		{name: "header line", in: "HTTP/1.1 200 OK\r\nno colon\r\n\r\n", err: "header line"},
		{name: "short body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", err: io.ErrUnexpectedEOF.Error()},
		{name: "cut header", in: "HTTP/1.1 200 OK\r\nContent-Le", err: io.ErrUnexpectedEOF.Error()},
	}
	for _, tc := range cases {
		br := bufio.NewReader(strings.NewReader(tc.in))
		for i, w := range tc.want {
			status, last, err := ReadStatus(br)
			if err != nil || status != w.status || last != w.last {
				t.Fatalf("%s: answer %d: %d %v %v, want %d %v", tc.name, i, status, last, err, w.status, w.last)
			}
		}
		_, _, err := ReadStatus(br)
		switch {
		case tc.err == "" && !errors.Is(err, io.EOF):
			t.Fatalf("%s: after the answers: %v, want EOF (input used up)", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Fatalf("%s: error %v, want one naming %q", tc.name, err, tc.err)
		}
	}
}
