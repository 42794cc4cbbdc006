package http2

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// answersOn reads frames until the HEADERS (and DATA) of stream id, or
// its reset, and returns its status (0 for a reset), content type and
// body.
func answersOn(t *testing.T, fr *http2.Framer, id uint32) (status int, ctype, body string) {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			fmt.Sscan(f.PseudoValue("status"), &status)
			for _, hf := range f.RegularFields() {
				if hf.Name == "content-type" {
					ctype = hf.Value
				}
			}
			if f.StreamEnded() {
				return status, ctype, body
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			body += string(f.Data())
			if f.StreamEnded() {
				return status, ctype, body
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return 0, "", ""
			}
		}
	}
}

// A request whose content-length header disagrees with its DATA frames
// is malformed (RFC 9113 §8.1.1): it is refused, its handler never runs
// (the value it carries was stored as sent), and the server's Reject
// writes the answer, as it writes the HTTP/1.1 server's refusals.
func TestContentLengthMismatchRefused(t *testing.T) {
	var ran atomic.Int32
	reject := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad_request", "message": msg})
	}
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		echo(w, r)
	}), Reject: reject, MaxBodyBytes: 100})
	_, fr := rawConn(t, addr)
	for i, tc := range []struct {
		length, body string
		status       int
	}{
		{"2", "abcdef", http.StatusBadRequest},
		{"10", "abc", http.StatusBadRequest},
		{"abc", "abc", http.StatusBadRequest},
		{"-3", "abc", http.StatusBadRequest},
		{"", strings.Repeat("x", 101), http.StatusRequestEntityTooLarge},
	} {
		id := uint32(2*i + 1)
		fields := []string{":method", "PUT", ":path", "/k", ":scheme", "http", ":authority", "x"}
		if tc.length != "" {
			fields = append(fields, "content-length", tc.length)
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlockOf(fields...), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteData(id, true, []byte(tc.body)); err != nil {
			t.Fatal(err)
		}
		status, ctype, body := answersOn(t, fr, id)
		if status != tc.status || ctype != "application/json" || !strings.Contains(body, `"error"`) {
			t.Errorf("content-length %q, body of %d bytes: %d %q %q, want a JSON %d", tc.length, len(tc.body), status, ctype, body, tc.status)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for malformed requests", n)
	}
	// A content-length that holds is served.
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 21, EndHeaders: true,
		BlockFragment: headerBlockOf(":method", "PUT", ":path", "/k", ":scheme", "http", ":authority", "x", "content-length", "3")}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(21, true, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if status, _, body := answersOn(t, fr, 21); status != 201 || body != "abc" {
		t.Fatalf("a request whose length holds: %d %q", status, body)
	}
}
