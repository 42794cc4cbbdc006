package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/kv"
)

// jsonKey is a key in a JSON answer: as a string when it is valid UTF-8,
// else base64 (standard alphabet) in key_base64; exactly one is set.
type jsonKey struct {
	Key       *string `json:"key,omitempty"`
	KeyBase64 *string `json:"key_base64,omitempty"`
}

func makeJSONKey(k []byte) jsonKey {
	if utf8.Valid(k) {
		s := string(k)
		return jsonKey{Key: &s}
	}
	s := base64.StdEncoding.EncodeToString(k)
	return jsonKey{KeyBase64: &s}
}

// listAnswer is the JSON answer of a listing.
type listAnswer struct {
	Entries      []listEntry `json:"entries"`
	Continuation string      `json:"continuation,omitempty"`
}

type listEntry struct {
	jsonKey
	Version uint64 `json:"version,omitempty"`
	Value   []byte `json:"value,omitempty"` // base64
}

// firstUserKey is the least key a client can write: every key below it
// begins with 0x00 (cluster.IsReserved).
var firstUserKey = []byte{0x01}

// v1List serves GET /v1/kv?prefix=P or ?start=A&end=B (end exclusive).
func (a *api) v1List(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	q := r.URL.Query()
	var opts kv.ListOptions
	for _, p := range []struct {
		name string
		dst  *[]byte
	}{{"prefix", &opts.Prefix}, {"start", &opts.Start}, {"end", &opts.End}} {
		if q.Has(p.name) {
			v := q.Get(p.name)
			if len(v) > a.cfg.MaxKeySize {
				badRequest(w, fmt.Sprintf("%s of %d bytes is over the key limit of %d", p.name, len(v), a.cfg.MaxKeySize))
				return
			}
			*p.dst = []byte(v)
		}
	}
	for _, b := range [][]byte{opts.Prefix, opts.Start, opts.End} {
		if cluster.IsReserved(b) {
			writeError(w, http.StatusBadRequest, "reserved_key", "keys beginning with byte 0x00 are reserved for the system: a listing cannot name them")
			return
		}
	}
	if len(opts.Start) == 0 {
		// The system keys (first byte 0x00: tokens, membership, leases)
		// sort first; a listing begins after them whatever the role.
		opts.Start = firstUserKey
	}
	if opts.End != nil && len(opts.End) == 0 {
		badRequest(w, "end is empty: leave it out to list to the last key")
		return
	}
	if opts.End != nil && string(opts.Start) > string(opts.End) {
		badRequest(w, "start is after end")
		return
	}
	var err error
	if opts.Limit, err = intParam(q, "limit"); err != nil {
		badRequest(w, err.Error())
		return
	}
	if opts.KeysOnly, err = boolParam(q, "keys_only"); err != nil {
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
	page, err := a.b.List(r.Context(), opts)
	if err != nil {
		writeBackendError(w, a.cfg.Logger, err)
		return
	}
	ans := listAnswer{Entries: make([]listEntry, 0, len(page.Entries))}
	for _, e := range page.Entries {
		ans.Entries = append(ans.Entries, listEntry{jsonKey: makeJSONKey(e.Key), Version: e.Version, Value: e.Value})
	}
	if page.More {
		ans.Continuation = encodeContinuation(page.Last)
	}
	writeJSON(w, ans)
}

// intParam parses a page-size parameter: absent is 0 (the default), else
// 1 to kv.MaxListLimit.
func intParam(q url.Values, name string) (int, error) {
	if !q.Has(name) {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get(name))
	if err != nil || n < 1 || n > kv.MaxListLimit {
		return 0, fmt.Errorf("%s %q: want an integer from 1 to %d", name, q.Get(name), kv.MaxListLimit)
	}
	return n, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s %q: want true or false", name, v)
	}
}

// consistencyParam parses consistency=linearizable|serializable; the
// default is linearizable.
func consistencyParam(q url.Values) (kv.Consistency, error) {
	switch c := q.Get("consistency"); c {
	case "", "linearizable":
		return kv.Linearizable, nil
	case "serializable":
		return kv.Serializable, nil
	default:
		return 0, fmt.Errorf("consistency must be linearizable or serializable, not %s", strconv.Quote(c))
	}
}

// Continuations are opaque to clients: the base64 (URL alphabet, no
// padding) of the last sort key of the page. The coordinator checks that
// a continuation belongs to the query it comes with.
func encodeContinuation(last []byte) string { return base64.RawURLEncoding.EncodeToString(last) }

func continuationParam(q url.Values) ([]byte, error) {
	if !q.Has("continuation") {
		return nil, nil
	}
	c := q.Get("continuation")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || c == "" || len(b) > 2*wire64k {
		return nil, fmt.Errorf("continuation %q is not one this API gave", truncate(c))
	}
	return b, nil
}

// wire64k bounds a continuation: a key and an index term are far shorter.
const wire64k = 64 << 10

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
