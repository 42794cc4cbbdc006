package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// jsonAnswer answers every request 200 with body.
type jsonAnswer string

func (a jsonAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(string(a))), Request: r}, nil
}

// A term that is not UTF-8 comes as term_base64; the match carries its
// bytes.
func TestIndexQueryDecodesBase64Terms(t *testing.T) {
	c, err := New([]string{"http://node"}, Options{HTTP: &http.Client{Transport: jsonAnswer(
		`{"entries": [{"key": "k1", "term_base64": "Y2Fm6Q=="}, {"key_base64": "/w==", "term": "café"}]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.IndexQuery(context.Background(), IndexQueryOptions{Index: "t_bin", Start: "a", End: "z", ReturnTerms: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Matches) != 2 || string(p.Matches[0].Key) != "k1" || p.Matches[0].Term != "caf\xe9" ||
		string(p.Matches[1].Key) != "\xff" || p.Matches[1].Term != "café" {
		t.Fatalf("matches %q", p.Matches)
	}
}
