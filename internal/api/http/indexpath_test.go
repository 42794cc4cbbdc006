package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// An exact index query whose term path has an empty, "." or ".." segment
// is refused with a JSON 400, as such a key path is, not redirected to the
// path cleaned of them: a client that follows redirects would get the
// objects of another term than the one it named, with nothing to tell it
// so. The same bytes percent-encoded name the term as written.
func TestUncleanIndexTermPathRefused(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	f.data["kb"] = kv.Value{Data: []byte("v"), Version: 1, Index: []wire.IndexTerm{{Name: "t_bin", Term: []byte("b")}}}
	f.data["kdots"] = kv.Value{Data: []byte("v"), Version: 1, Index: []wire.IndexTerm{{Name: "t_bin", Term: []byte("a/../b")}}}
	c := &http.Client{Transport: handlerTransport{h}}
	for _, path := range []string{
		"/v1/index/t_bin/a/../b", "/v1/index/t_bin//b", "/v1/index/t_bin/./b", "/v1/index/t_bin/x/..", "/v1/index/t_bin/..",
		"/v1/index/x/../t_bin/b",
	} {
		resp, err := c.Get("http://node" + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"error":"bad_request"`) {
			t.Errorf("GET %s: %d %q (at %s), want a JSON 400", path, resp.StatusCode, b, resp.Request.URL.Path)
		}
	}
	r := do(t, h, "GET", "/v1/index/t_bin/a%2F..%2Fb", nil, nil)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"kdots"`) || strings.Contains(r.body, `"kb"`) {
		t.Fatalf("GET /v1/index/t_bin/a%%2F..%%2Fb: %d %s, want the objects of term a/../b", r.code, r.body)
	}
}

// A _bin term need not be UTF-8 (a header value carries any byte from
// 0x80 up). return_terms answers such a term as term_base64, as a
// listing answers such a key as key_base64, rather than as a JSON string
// with each bad byte replaced by U+FFFD, which would name another term.
func TestIndexReturnsNonUTF8TermsInBase64(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	for k, term := range map[string]string{"k1": "caf\xe9", "k2": "caf\xe8", "k3": "café"} {
		if r := do(t, h, "PUT", "/v1/kv/"+k, strings.NewReader("v"), map[string]string{"X-Cairn-Index-t_bin": term}); r.code != http.StatusCreated {
			t.Fatalf("put %s: %d %s", k, r.code, r.body)
		}
	}
	r := do(t, h, "GET", "/v1/index/t_bin?start=caf&end=cag&return_terms=true", nil, nil)
	var ans struct {
		Entries []struct {
			Key        string  `json:"key"`
			Term       *string `json:"term"`
			TermBase64 *string `json:"term_base64"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || r.code != http.StatusOK {
		t.Fatalf("query: %d %s %v", r.code, r.body, err)
	}
	want := map[string]string{"k1": "caf\xe9", "k2": "caf\xe8", "k3": "café"}
	if len(ans.Entries) != len(want) {
		t.Fatalf("query: %s", r.body)
	}
	for _, e := range ans.Entries {
		var got string
		switch {
		case e.Term != nil && e.TermBase64 == nil:
			got = *e.Term
		case e.Term == nil && e.TermBase64 != nil:
			b, err := base64.StdEncoding.DecodeString(*e.TermBase64)
			if err != nil {
				t.Fatalf("%s: term_base64 %q: %v", e.Key, *e.TermBase64, err)
			}
			got = string(b)
		default:
			t.Fatalf("%s: want exactly one of term and term_base64: %s", e.Key, r.body)
		}
		if got != want[e.Key] {
			t.Errorf("%s: term %q, want %q", e.Key, got, want[e.Key])
		}
	}
}
