package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// IndexTerms are an object's secondary-index terms: index name (ending in
// _bin or _int) to its terms (decimal integers for _int).
type IndexTerms map[string][]string

// PutIndexed writes key=value with its index terms (the headers
// X-Cairn-Index-<name>), replacing the object's earlier terms.
func (c *Client) PutIndexed(ctx context.Context, key, value []byte, o PutOptions, index IndexTerms) (uint64, error) {
	h := http.Header{}
	if o.IfVersion != 0 {
		h.Set("If-Match", strconv.Quote(strconv.FormatUint(o.IfVersion, 10)))
	}
	if o.IfAbsent {
		h.Set("If-None-Match", "*")
	}
	for name, terms := range index {
		h.Set("X-Cairn-Index-"+name, strings.Join(terms, ", "))
	}
	var v uint64
	err := c.do(ctx, http.MethodPut, key, "", value, h, func(resp *http.Response, _ []byte) { v = etag(resp) })
	return v, err
}

// Head reads key's version, value size and index terms, not its value.
func (c *Client) Head(ctx context.Context, key []byte, serializable bool) (version uint64, size int64, index IndexTerms, err error) {
	q := ""
	if serializable {
		q = "?consistency=serializable"
	}
	err = c.do(ctx, http.MethodHead, key, q, nil, nil, func(resp *http.Response, _ []byte) {
		version, size = etag(resp), resp.ContentLength
		index = indexHeaders(resp.Header)
	})
	return version, size, index, err
}

// indexHeaders reads the X-Cairn-Index-* headers of an answer.
func indexHeaders(h http.Header) IndexTerms {
	out := IndexTerms{}
	for name, vals := range h {
		const p = "X-Cairn-Index-"
		if len(name) <= len(p) || !strings.EqualFold(name[:len(p)], p) {
			continue
		}
		idx := strings.ToLower(name[len(p):])
		for _, v := range vals {
			for _, t := range strings.Split(v, ",") {
				out[idx] = append(out[idx], strings.TrimSpace(t))
			}
		}
	}
	return out
}

// ListOptions of List: keys from Start (inclusive) to End (exclusive),
// or with Prefix, or both (the intersection); none: every key.
type ListOptions struct {
	Prefix, Start, End string
	// Limit: entries per page, 1 to 1000; 0: the server's default (100).
	Limit int
	// Continuation: the previous Page's, to get the next page.
	Continuation string
	KeysOnly     bool
	// Serializable: read the replicas' applied state (maybe stale)
	// instead of the default linearizable listing.
	Serializable bool
}

// Entry is one object of a listing (Version and Value empty with KeysOnly).
type Entry struct {
	Key     []byte
	Version uint64
	Value   []byte
}

// Page is one page of a listing; Continuation is empty on the last one.
type Page struct {
	Entries      []Entry
	Continuation string
}

// List returns one page of keys in order (GET /v1/kv).
func (c *Client) List(ctx context.Context, o ListOptions) (Page, error) {
	q := url.Values{}
	for k, v := range map[string]string{"prefix": o.Prefix, "start": o.Start, "end": o.End, "continuation": o.Continuation} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.KeysOnly {
		q.Set("keys_only", "true")
	}
	if o.Serializable {
		q.Set("consistency", "serializable")
	}
	var ans struct {
		Entries []struct {
			jsonKey
			Version uint64 `json:"version"`
			Value   []byte `json:"value"`
		} `json:"entries"`
		Continuation string `json:"continuation"`
	}
	if err := c.getJSON(ctx, "/v1/kv?"+q.Encode(), &ans); err != nil {
		return Page{}, err
	}
	p := Page{Continuation: ans.Continuation, Entries: make([]Entry, 0, len(ans.Entries))}
	for _, e := range ans.Entries {
		k, err := e.key()
		if err != nil {
			return Page{}, err
		}
		p.Entries = append(p.Entries, Entry{Key: k, Version: e.Version, Value: e.Value})
	}
	return p, nil
}

// IndexQueryOptions of IndexQuery: the objects whose term in Index is
// Term (exact) or, when Term is empty, in [Start, End] (inclusive;
// integer order for _int indexes).
type IndexQueryOptions struct {
	Index            string
	Term, Start, End string
	// MaxResults: matches per page, 1 to 1000; 0: the server's default.
	MaxResults   int
	Continuation string
	// ReturnTerms: each match carries its term.
	ReturnTerms  bool
	Serializable bool
}

// IndexMatch is one match of an index query (Term with ReturnTerms: its
// bytes, whether or not they are UTF-8).
type IndexMatch struct {
	Key  []byte
	Term string
}

// IndexPage is one page of an index query; Continuation is empty on the
// last one.
type IndexPage struct {
	Matches      []IndexMatch
	Continuation string
}

// IndexQuery returns one page of a secondary-index query
// (GET /v1/index/{name}...), in (term, key) order.
func (c *Client) IndexQuery(ctx context.Context, o IndexQueryOptions) (IndexPage, error) {
	path := "/v1/index/" + url.PathEscape(o.Index)
	q := url.Values{}
	if o.Term != "" {
		path += "/" + keyPath([]byte(o.Term))
	} else {
		q.Set("start", o.Start)
		q.Set("end", o.End)
	}
	if o.MaxResults != 0 {
		q.Set("max_results", strconv.Itoa(o.MaxResults))
	}
	if o.Continuation != "" {
		q.Set("continuation", o.Continuation)
	}
	if o.ReturnTerms {
		q.Set("return_terms", "true")
	}
	if o.Serializable {
		q.Set("consistency", "serializable")
	}
	var ans struct {
		Entries []struct {
			jsonKey
			Term       string  `json:"term"`
			TermBase64 *string `json:"term_base64"`
		} `json:"entries"`
		Continuation string `json:"continuation"`
	}
	if err := c.getJSON(ctx, path+"?"+q.Encode(), &ans); err != nil {
		return IndexPage{}, err
	}
	p := IndexPage{Continuation: ans.Continuation, Matches: make([]IndexMatch, 0, len(ans.Entries))}
	for _, e := range ans.Entries {
		k, err := e.key()
		if err != nil {
			return IndexPage{}, err
		}
		term := e.Term
		if e.TermBase64 != nil {
			b, err := base64.StdEncoding.DecodeString(*e.TermBase64)
			if err != nil {
				return IndexPage{}, fmt.Errorf("cairn: decoding a term: %w", err)
			}
			term = string(b)
		}
		p.Matches = append(p.Matches, IndexMatch{Key: k, Term: term})
	}
	return p, nil
}

// jsonKey is a key of a JSON answer: a string, or base64 for keys that
// are not valid UTF-8.
type jsonKey struct {
	Key       *string `json:"key"`
	KeyBase64 *string `json:"key_base64"`
}

func (k jsonKey) key() ([]byte, error) {
	switch {
	case k.Key != nil:
		return []byte(*k.Key), nil
	case k.KeyBase64 != nil:
		return base64.StdEncoding.DecodeString(*k.KeyBase64)
	}
	return nil, errors.New("cairn: an entry without a key")
}

// getJSON GETs path on the node in use and decodes the JSON answer,
// retrying on other nodes as do does for reads.
func (c *Client) getJSON(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.retry(ctx, func(actx context.Context, ep string) error { return c.getOnce(actx, ep+path, out) })
}

func (c *Client) getOnce(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("cairn: decoding the answer: %w", err)
	}
	return nil
}
