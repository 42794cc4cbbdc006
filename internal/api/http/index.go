package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// indexHeaderPrefix starts the headers that carry an object's secondary
// index terms: X-Cairn-Index-<name>: <term>[, <term>...]. Index names are
// case-insensitive (HTTP header names are): Cairn keeps them lowercased.
const indexHeaderPrefix = "X-Cairn-Index-"

// reservedIndexPrefix begins the names of the indexes the etcd API
// keeps (wire.EtcdLeaseIndex): an HTTP PUT cannot set their terms.
const reservedIndexPrefix = "etcd-"

// parseIndexHeaders reads a PUT's index terms from its headers. A term
// given more than once (in one header line or several, or for an _int
// index written differently, as 7 and 07) counts once: copies are dropped
// as they are read, before the bounds on an object's terms apply, so at
// most wire.MaxIndexTerms distinct terms are ever held, however long the
// headers.
func parseIndexHeaders(h http.Header) ([]wire.IndexTerm, error) {
	var terms []wire.IndexTerm
	var seen map[string]struct{} // index name, 0x00, term: names hold no 0x00
	for name, vals := range h {
		if len(name) < len(indexHeaderPrefix) || !strings.EqualFold(name[:len(indexHeaderPrefix)], indexHeaderPrefix) {
			continue
		}
		idx := strings.ToLower(name[len(indexHeaderPrefix):])
		if err := wire.ValidIndexName(idx); err != nil {
			return nil, fmt.Errorf("header %s: index names are letters, digits, '_' and '-', at most %d bytes, ending in _bin or _int", name, wire.MaxIndexName)
		}
		if strings.HasPrefix(idx, reservedIndexPrefix) {
			// The etcd API keeps a key's lease there: a term set over
			// HTTP would make the etcd API report a lease the key does
			// not have.
			return nil, fmt.Errorf("header %s: index names beginning with %q are the etcd API's", name, reservedIndexPrefix)
		}
		for _, v := range vals {
			for _, part := range strings.Split(v, ",") {
				part = strings.TrimSpace(part)
				if part == "" {
					return nil, fmt.Errorf("header %s: an empty term", name)
				}
				t, err := wire.ParseIndexTerm(idx, part)
				if err != nil {
					return nil, fmt.Errorf("header %s: %v", name, strings.TrimPrefix(err.Error(), wire.ErrBadIndex.Error()+": "))
				}
				k := idx + "\x00" + string(t.Term)
				if _, dup := seen[k]; dup {
					continue
				}
				if len(terms) == wire.MaxIndexTerms {
					return nil, fmt.Errorf("too many index terms: at most %d distinct terms per object (copies of a term count once)", wire.MaxIndexTerms)
				}
				if seen == nil {
					seen = make(map[string]struct{})
				}
				seen[k] = struct{}{}
				terms = append(terms, t)
			}
		}
	}
	terms, err := wire.NormalizeIndex(terms)
	if err != nil {
		return nil, fmt.Errorf("%v", strings.TrimPrefix(err.Error(), wire.ErrBadIndex.Error()+": "))
	}
	return terms, nil
}

// setIndexHeaders writes an object's index terms as X-Cairn-Index-<name>
// headers, one per index, its terms comma-separated.
func setIndexHeaders(h http.Header, terms []wire.IndexTerm) {
	for i := 0; i < len(terms); {
		j := i
		var texts []string
		for ; j < len(terms) && terms[j].Name == terms[i].Name; j++ {
			texts = append(texts, terms[j].Text())
		}
		h[textproto.CanonicalMIMEHeaderKey(indexHeaderPrefix+terms[i].Name)] = []string{strings.Join(texts, ", ")}
		i = j
	}
}

// indexAnswer is the JSON answer of an index query.
type indexAnswer struct {
	Entries      []indexEntry `json:"entries"`
	Continuation string       `json:"continuation,omitempty"`
}

// indexEntry is one match; with return_terms, its term as a string when
// it is valid UTF-8, else base64 (standard alphabet) in term_base64, as
// keys are (a _bin term is any bytes).
type indexEntry struct {
	jsonKey
	Term       *string `json:"term,omitempty"`
	TermBase64 *string `json:"term_base64,omitempty"`
}

// v1Index serves GET /v1/index/{name}/{term} (exact) and
// GET /v1/index/{name}?start=A&end=B (inclusive range).
func (a *api) v1Index(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/index/")
	rawName, rawTerm, exact := strings.Cut(rest, "/")
	name, err := url.PathUnescape(rawName)
	if err != nil {
		badRequest(w, "bad escape in index name: "+err.Error())
		return
	}
	name = strings.ToLower(name)
	if err := wire.ValidIndexName(name); err != nil {
		badRequest(w, fmt.Sprintf("index name %q: want letters, digits, '_' and '-', at most %d bytes, ending in _bin or _int", name, wire.MaxIndexName))
		return
	}
	q := r.URL.Query()
	opts := kv.IndexQueryOptions{Name: name}
	var start, end string
	if exact {
		if start, err = url.PathUnescape(rawTerm); err != nil {
			badRequest(w, "bad escape in index term: "+err.Error())
			return
		}
		end = start
		if q.Has("start") || q.Has("end") {
			badRequest(w, "start and end cannot be combined with a term in the path")
			return
		}
	} else {
		if !q.Has("start") || !q.Has("end") {
			badRequest(w, "an index query needs a term in the path (/v1/index/{name}/{term}) or both start and end")
			return
		}
		start, end = q.Get("start"), q.Get("end")
	}
	for _, p := range []struct {
		what, text string
		dst        *[]byte
	}{{"start", start, &opts.Start}, {"end", end, &opts.End}} {
		t, err := wire.ParseIndexTerm(name, p.text)
		if err != nil {
			badRequest(w, p.what+": "+strings.TrimPrefix(err.Error(), wire.ErrBadIndex.Error()+": "))
			return
		}
		*p.dst = t.Term
	}
	if opts.Limit, err = intParam(q, "max_results"); err != nil {
		badRequest(w, err.Error())
		return
	}
	returnTerms, err := boolParam(q, "return_terms")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if opts.Consistency, err = consistencyParam(q); err != nil {
		badRequest(w, err.Error())
		return
	}
	if opts.After, err = continuationParam(q); err != nil {
		badRequest(w, err.Error())
		return
	}
	page, err := a.b.IndexQuery(r.Context(), opts)
	if err != nil {
		writeBackendError(w, a.cfg.Logger, err)
		return
	}
	ans := indexAnswer{Entries: make([]indexEntry, 0, len(page.Entries))}
	for _, e := range page.Entries {
		if cluster.IsReserved(e.Key) {
			// Keys beginning with 0x00 (the etcd API's keys that begin
			// with 0x00, kept under 0x00 0xFF) are out of the HTTP API's
			// reach, as in listings.
			continue
		}
		ie := indexEntry{jsonKey: makeJSONKey(e.Key)}
		if returnTerms {
			if t := e.Term.Text(); utf8.ValidString(t) {
				ie.Term = &t
			} else {
				b := base64.StdEncoding.EncodeToString(e.Term.Term)
				ie.TermBase64 = &b
			}
		}
		ans.Entries = append(ans.Entries, ie)
	}
	if page.More {
		ans.Continuation = encodeContinuation(page.Last)
	}
	writeJSON(w, ans)
}
