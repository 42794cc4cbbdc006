package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// Index headers on PUT reach the backend as normalized terms, come back
// on GET and HEAD, and HEAD carries the size without the value.
func TestIndexHeadersRoundTrip(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	r := do(t, h, "PUT", "/v1/kv/a", strings.NewReader("hello"), map[string]string{
		"X-Cairn-Index-Email_bin": "b@x, a@x",
		"X-Cairn-Index-age_int":   " -42 ",
	})
	if r.code != 201 {
		t.Fatalf("put: %d %s", r.code, r.body)
	}
	want := []string{"age_int=-42", "email_bin=a@x", "email_bin=b@x"}
	var got []string
	for _, tm := range f.lastW.Index {
		got = append(got, tm.Name+"="+tm.Text())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("backend got terms %v, want %v", got, want)
	}
	for _, method := range []string{"GET", "HEAD"} {
		gets, heads := f.gets, f.heads
		r = do(t, h, method, "/v1/kv/a", nil, nil)
		if method == "HEAD" && (f.gets != gets || f.heads != heads+1) {
			t.Fatalf("HEAD read the value (%d gets, %d heads before; %d, %d after)", gets, heads, f.gets, f.heads)
		}
		if r.code != 200 || r.h.Get("X-Cairn-Index-email_bin") != "a@x, b@x" || r.h.Get("X-Cairn-Index-age_int") != "-42" {
			t.Fatalf("%s: %d %v", method, r.code, r.h)
		}
		if r.h.Get("Content-Length") != "5" {
			t.Fatalf("%s: Content-Length %q, want 5", method, r.h.Get("Content-Length"))
		}
	}
	if r.body != "" {
		t.Fatalf("HEAD returned a body %q", r.body)
	}
	// v0 PUT takes the headers too.
	if r := do(t, h, "PUT", "/v0/entity?id=b", strings.NewReader("x"), map[string]string{"X-Cairn-Index-n_int": "7"}); r.code != 201 || len(f.lastW.Index) != 1 {
		t.Fatalf("v0 put: %d %v", r.code, f.lastW.Index)
	}
}

// Every malformed index header, listing or index query is a 400 with a
// JSON body, and reaches no backend call.
func TestListAndIndexBadRequests(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{MaxKeySize: 64})
	long := strings.Repeat("x", wire.MaxIndexTermSize+1)
	many := make([]string, wire.MaxIndexTerms+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	for _, hdr := range []map[string]string{
		{"X-Cairn-Index-email": "a"},      // no _bin/_int suffix
		{"X-Cairn-Index-e.mail_bin": "a"}, // bad character
		{"X-Cairn-Index-_bin": "a"},       // empty name
		{"X-Cairn-Index-": "a"},           // no name
		{"X-Cairn-Index-age_int": "12x"},  // not an integer
		{"X-Cairn-Index-age_int": "99999999999999999999"},
		{"X-Cairn-Index-age_int": "1,,2"},                // empty term
		{"X-Cairn-Index-e_bin": long},                    // term too long
		{"X-Cairn-Index-n_int": strings.Join(many, ",")}, // too many terms
		{"X-Cairn-Index-" + strings.Repeat("a", 61) + "_bin": "x"},
	} {
		for _, target := range []string{"/v1/kv/k", "/v0/entity?id=k"} {
			r := do(t, h, "PUT", target, strings.NewReader("v"), hdr)
			if r.code != 400 || errCode(t, r) != "bad_request" {
				t.Fatalf("PUT %s %v: %d %s", target, hdr, r.code, r.body)
			}
		}
	}
	if f.writeCount() != 0 {
		t.Fatalf("%d writes reached the backend", f.writeCount())
	}
	for _, target := range []string{
		"/v1/kv?limit=0", "/v1/kv?limit=1001", "/v1/kv?limit=x", "/v1/kv?keys_only=yes",
		"/v1/kv?consistency=eventual", "/v1/kv?continuation=%21%21", "/v1/kv?continuation=",
		"/v1/kv?start=b&end=a", "/v1/kv?prefix=" + strings.Repeat("p", 65),
		"/v1/index/age", "/v1/index/age/1", "/v1/index/a.b_bin/x", "/v1/index/age_int/abc",
		"/v1/index/age_int?start=1", "/v1/index/age_int?start=x&end=2", "/v1/index/age_int?start=1&end=2.5",
		"/v1/index/age_int/1?start=1&end=2", "/v1/index/e_bin/x?max_results=0", "/v1/index/e_bin/x?max_results=5000",
		"/v1/index/e_bin/x?return_terms=1", "/v1/index/e_bin/x?consistency=strong", "/v1/index/e_bin/x?continuation=*",
		"/v1/index/e_bin/" + url.PathEscape(long), "/v1/index/e_bin?start=&end=b",
	} {
		r := do(t, h, "GET", target, nil, nil)
		if r.code != 400 || errCode(t, r) != "bad_request" {
			t.Fatalf("GET %s: %d %s", target, r.code, r.body)
		}
	}
	for _, target := range []string{"/v1/kv", "/v1/index/e_bin/x"} {
		if r := do(t, h, "POST", target, nil, nil); r.code != 405 {
			t.Fatalf("POST %s: %d", target, r.code)
		}
	}
	// The coordinator's own refusal (a continuation of another query) is
	// a 400 too.
	f.err = fmt.Errorf("%w: the continuation does not belong to this query", kv.ErrInvalidArgument)
	if r := do(t, h, "GET", "/v1/index/e_bin/x?continuation=YQ", nil, nil); r.code != 400 || errCode(t, r) != "bad_request" {
		t.Fatalf("invalid argument from the backend: %d %s", r.code, r.body)
	}
}

func TestListAndIndexAnswers(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	for i, k := range []string{"a1", "a2", "a3", "b1", "bad\xff"} {
		hdr := map[string]string{"X-Cairn-Index-n_int": fmt.Sprint(3 - i)}
		if r := do(t, h, "PUT", "/v1/kv/"+url.PathEscape(k), strings.NewReader("v"+k), hdr); r.code/100 != 2 {
			t.Fatalf("put %q: %d", k, r.code)
		}
	}
	var la struct {
		Entries []struct {
			Key       *string `json:"key"`
			KeyBase64 *string `json:"key_base64"`
			Version   uint64  `json:"version"`
			Value     []byte  `json:"value"`
		} `json:"entries"`
		Continuation string `json:"continuation"`
	}
	r := do(t, h, "GET", "/v1/kv?prefix=a&limit=2", nil, nil)
	if err := json.Unmarshal([]byte(r.body), &la); err != nil || r.code != 200 {
		t.Fatalf("list: %d %s %v", r.code, r.body, err)
	}
	if len(la.Entries) != 2 || *la.Entries[0].Key != "a1" || string(la.Entries[1].Value) != "va2" || la.Continuation == "" {
		t.Fatalf("list page: %s", r.body)
	}
	if f.lastList.Consistency != kv.Linearizable || string(f.lastList.Prefix) != "a" || f.lastList.Limit != 2 {
		t.Fatalf("backend got %+v", f.lastList)
	}
	r = do(t, h, "GET", "/v1/kv?prefix=a&limit=2&keys_only=true&consistency=serializable&continuation="+la.Continuation, nil, nil)
	la.Entries, la.Continuation = nil, ""
	if err := json.Unmarshal([]byte(r.body), &la); err != nil || len(la.Entries) != 1 || *la.Entries[0].Key != "a3" ||
		la.Entries[0].Value != nil || la.Continuation != "" || f.lastList.Consistency != kv.Serializable {
		t.Fatalf("second page: %s %v", r.body, err)
	}
	r = do(t, h, "GET", "/v1/kv?start=b&end=c", nil, nil)
	if err := json.Unmarshal([]byte(r.body), &la); err != nil || len(la.Entries) != 2 || la.Entries[1].KeyBase64 == nil ||
		*la.Entries[1].KeyBase64 != base64.StdEncoding.EncodeToString([]byte("bad\xff")) {
		t.Fatalf("range with a non-UTF-8 key: %s %v", r.body, err)
	}
	var ia struct {
		Entries []struct {
			Key  string  `json:"key"`
			Term *string `json:"term"`
		} `json:"entries"`
	}
	r = do(t, h, "GET", "/v1/index/n_int?start=-1&end=2&return_terms=true", nil, nil)
	if err := json.Unmarshal([]byte(r.body), &ia); err != nil || len(ia.Entries) != 4 || *ia.Entries[0].Term != "-1" || ia.Entries[0].Key != "bad\ufffd" && ia.Entries[3].Key != "a2" {
		t.Fatalf("index range: %s %v", r.body, err)
	}
	if ia.Entries[3].Key != "a2" || *ia.Entries[3].Term != "2" {
		t.Fatalf("index range order: %s", r.body)
	}
	r = do(t, h, "GET", "/v1/index/N_INT/3", nil, nil)
	ia.Entries = nil
	if err := json.Unmarshal([]byte(r.body), &ia); err != nil || len(ia.Entries) != 1 || ia.Entries[0].Key != "a1" || ia.Entries[0].Term != nil {
		t.Fatalf("exact: %s %v", r.body, err)
	}
}
