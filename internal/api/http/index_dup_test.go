package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// repeatTerms is n copies of each term, comma-separated, in rounds (a, b,
// a, b, ...), so that copies of one term are not next to each other.
func repeatTerms(n int, terms ...string) string {
	parts := make([]string, 0, n*len(terms))
	for i := 0; i < n; i++ {
		parts = append(parts, terms...)
	}
	return strings.Join(parts, ", ")
}

// putWithHeader PUTs /v1/kv/k or /v0/entity?id=k with h as its headers
// (several lines of one name allowed).
func putWithHeader(t *testing.T, hd http.Handler, target string, h http.Header) resp {
	t.Helper()
	req := httptest.NewRequest("PUT", target, strings.NewReader("v"))
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	hd.ServeHTTP(w, req)
	return resp{w.Code, w.Header(), w.Body.String()}
}

// errMessage is the message of a JSON error answer.
func errMessage(t *testing.T, r resp) string {
	t.Helper()
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return e.Message
}

// A term repeated on a PUT counts once (docs/http-api.md: "duplicates
// count once"): the copies are dropped before the bounds on the number
// and size of an object's terms apply, however many there are, in one
// header line or several, and for _int terms written differently. The
// bounds still refuse too many distinct terms, or too many bytes of them,
// with a 400 naming the bound, and nothing is written.
func TestIndexDuplicateTermsCountOnce(t *testing.T) {
	long := func(c byte) string { return strings.Repeat(string(c), wire.MaxIndexTermSize) }
	distinct := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%03d", i)
		}
		return out
	}
	lines := func(n int, line string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = line
		}
		return out
	}
	ok := []struct {
		name  string
		h     http.Header
		terms int // distinct terms the backend gets
	}{
		{"300 copies of one term", http.Header{"X-Cairn-Index-E_bin": {repeatTerms(300, "a")}}, 1},
		{"1000 copies over 10 header lines", http.Header{"X-Cairn-Index-E_bin": lines(10, repeatTerms(100, "a"))}, 1},
		{"_int terms written differently", http.Header{"X-Cairn-Index-N_int": {repeatTerms(100, "7", "07", "+7", " 7")}}, 1},
		{"64 distinct terms, 5 copies each", http.Header{"X-Cairn-Index-E_bin": {repeatTerms(5, distinct(wire.MaxIndexTerms)...)}}, wire.MaxIndexTerms},
		{"15 KiB of distinct terms, 20 copies each", http.Header{"X-Cairn-Index-E_bin": {repeatTerms(20, long('a'), long('b'), long('c'), long('d'), long('e'), long('f'), long('g'), long('h'), long('i'), long('j'), long('k'), long('l'), long('m'), long('n'), long('o'))}}, 15},
	}
	for _, c := range ok {
		for _, target := range []string{"/v1/kv/k", "/v0/entity?id=k"} {
			f := newFake()
			h := mustNew(t, f, Config{})
			r := putWithHeader(t, h, target, c.h)
			if r.code != 201 {
				t.Errorf("%s: PUT %s: %d %s, want 201", c.name, target, r.code, r.body)
				continue
			}
			if len(f.lastW.Index) != c.terms {
				t.Errorf("%s: PUT %s: the backend got %d terms, want %d", c.name, target, len(f.lastW.Index), c.terms)
			}
		}
	}

	refused := []struct {
		name string
		h    http.Header
		want string // in the error message
	}{
		{"65 distinct terms", http.Header{"X-Cairn-Index-E_bin": {strings.Join(distinct(wire.MaxIndexTerms+1), ", ")}}, fmt.Sprintf("at most %d", wire.MaxIndexTerms)},
		{"65 distinct terms over two indexes, copied", http.Header{
			"X-Cairn-Index-E_bin": {repeatTerms(3, distinct(40)...)},
			"X-Cairn-Index-F_bin": {repeatTerms(3, distinct(25)...)},
		}, fmt.Sprintf("at most %d", wire.MaxIndexTerms)},
		{"16 KiB of distinct terms, 20 copies each", http.Header{"X-Cairn-Index-E_bin": {repeatTerms(20, long('a'), long('b'), long('c'), long('d'), long('e'), long('f'), long('g'), long('h'), long('i'), long('j'), long('k'), long('l'), long('m'), long('n'), long('o'), long('p'))}}, fmt.Sprintf("at most %d", wire.MaxIndexBytes)},
	}
	for _, c := range refused {
		for _, target := range []string{"/v1/kv/k", "/v0/entity?id=k"} {
			f := newFake()
			h := mustNew(t, f, Config{})
			r := putWithHeader(t, h, target, c.h)
			if r.code != 400 || errCode(t, r) != "bad_request" || !strings.Contains(errMessage(t, r), c.want) {
				t.Errorf("%s: PUT %s: %d %s, want 400 bad_request saying %q", c.name, target, r.code, r.body, c.want)
			}
			if f.writeCount() != 0 {
				t.Errorf("%s: PUT %s: %d writes reached the backend", c.name, target, f.writeCount())
			}
		}
	}
}

// parseIndexHeaders drops copies of a term as it reads them: headers with
// copies (up to the 64 KiB a node reads of a request's headers) give the
// same terms as the headers without, so the write and its fingerprint are
// the same; the count bound is on distinct terms and says so.
func TestParseIndexHeadersDropsCopies(t *testing.T) {
	once, err := parseIndexHeaders(http.Header{
		"X-Cairn-Index-E_bin": {"b, a"},
		"X-Cairn-Index-N_int": {"-7"},
	})
	if err != nil || len(once) != 3 {
		t.Fatalf("terms %v, %v", once, err)
	}
	copies := repeatTerms(64<<10/len("a, b, "), "a", "b")
	many, err := parseIndexHeaders(http.Header{
		"X-Cairn-Index-e_bin": {copies, "b", "a, a"},
		"X-Cairn-Index-N_int": {repeatTerms(50, "-7", "-07", " -7 ")},
	})
	if err != nil {
		t.Fatalf("%d bytes of copies of 3 terms: %v", len(copies), err)
	}
	if fmt.Sprint(many) != fmt.Sprint(once) {
		t.Fatalf("with copies %v, without %v", many, once)
	}

	terms := make([]string, wire.MaxIndexTerms+1)
	for i := range terms {
		terms[i] = fmt.Sprint(i)
	}
	_, err = parseIndexHeaders(http.Header{"X-Cairn-Index-N_int": {repeatTerms(10, terms...)}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d distinct terms", wire.MaxIndexTerms)) {
		t.Fatalf("%d distinct terms, 10 copies each: %v", len(terms), err)
	}
	got, err := parseIndexHeaders(http.Header{"X-Cairn-Index-N_int": {repeatTerms(10, terms[:wire.MaxIndexTerms]...)}})
	if err != nil || len(got) != wire.MaxIndexTerms {
		t.Fatalf("%d distinct terms, 10 copies each: %d terms, %v", wire.MaxIndexTerms, len(got), err)
	}
}
