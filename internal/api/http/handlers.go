package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/internal/kv"
)

func (a *api) v0Status(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("OK"))
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed; allowed: "+allow)
}

func (a *api) v0Entity(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPut, http.MethodDelete:
	default:
		methodNotAllowed(w, "GET, PUT, DELETE")
		return
	}
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" {
		badRequest(w, "missing or empty id")
		return
	}
	key := []byte(id)
	if !a.checkKey(w, key) {
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		ack, from, err := a.replicasParam(r)
		if err != nil {
			badRequest(w, err.Error())
			return
		}
		v, err := a.b.Get(ctx, key, kv.ReadOptions{Ack: ack, From: from})
		if err != nil {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		setIndexHeaders(w.Header(), v.Index)
		_, _ = w.Write(v.Data)
	case http.MethodPut:
		opts, body, ok := a.parsePut(w, r, false)
		if !ok {
			return
		}
		if _, _, err := a.b.Put(ctx, key, body, opts); err != nil {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		opts, err := a.writeOptions(r, false)
		if err != nil {
			badRequest(w, err.Error())
			return
		}
		if _, err := a.b.Delete(ctx, key, opts); err != nil && !isNotFound(err) {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}

func isNotFound(err error) bool { return errors.Is(err, kv.ErrNotFound) }

func etag(v uint64) string { return `"` + strconv.FormatUint(v, 10) + `"` }

func (a *api) v1KV(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
	default:
		methodNotAllowed(w, "GET, HEAD, PUT, DELETE")
		return
	}
	// The key is the escaped path after /v1/kv/ (so %2F stays part of a
	// key), taken only when the path names /v1/kv/ literally: one that
	// reaches this handler with its prefix percent-encoded would
	// otherwise name another key than the one routed and authorised.
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/kv/")
	if !ok {
		badRequest(w, "the path must begin /v1/kv/ without escapes")
		return
	}
	k, err := url.PathUnescape(raw)
	if err != nil {
		badRequest(w, "bad escape in key: "+err.Error())
		return
	}
	key := []byte(k)
	if !a.checkKey(w, key) {
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		opts := kv.ReadOptions{}
		switch c := r.URL.Query().Get("consistency"); c {
		case "", "linearizable":
		case "serializable":
			opts.Consistency = kv.Serializable
		default:
			badRequest(w, "consistency must be linearizable or serializable, not "+strconv.Quote(c))
			return
		}
		if opts.Ack, opts.From, err = a.replicasParam(r); err != nil {
			badRequest(w, err.Error())
			return
		}
		if r.Method == http.MethodHead {
			// HEAD reads the version, size and index terms, not the value.
			m, err := a.b.Head(ctx, key, opts)
			if err != nil {
				writeBackendError(w, a.cfg.Logger, err)
				return
			}
			h := w.Header()
			h["Etag"] = []string{etag(m.Version)}
			h["Content-Type"] = octetStream
			h["Content-Length"] = []string{strconv.Itoa(m.Size)}
			setIndexHeaders(h, m.Index)
			return
		}
		v, err := a.b.Get(ctx, key, opts)
		if err != nil {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		h := w.Header()
		h["Etag"] = []string{etag(v.Version)}
		h["Content-Type"] = octetStream
		h["Content-Length"] = []string{strconv.Itoa(len(v.Data))}
		setIndexHeaders(h, v.Index)
		_, _ = w.Write(v.Data)
	case http.MethodPut:
		opts, body, ok := a.parsePut(w, r, true)
		if !ok {
			return
		}
		ver, created, err := a.b.Put(ctx, key, body, opts)
		if err != nil {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		h := w.Header()
		h["Etag"] = []string{etag(ver)}
		h["Content-Type"] = applicationJSON
		if created {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(strconv.AppendUint(append(make([]byte, 0, 32), `{"version":`...), ver, 10))
		_, _ = w.Write([]byte("}\n"))
	case http.MethodDelete:
		opts, err := a.writeOptions(r, true)
		if err != nil {
			badRequest(w, err.Error())
			return
		}
		if opts.Cond == kv.CondIfAbsent {
			badRequest(w, "If-None-Match is not supported on DELETE")
			return
		}
		if _, err := a.b.Delete(ctx, key, opts); err != nil {
			writeBackendError(w, a.cfg.Logger, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// Header values the data routes set on every answer, in canonical form so
// no Set has to canonicalize (and allocate) a name per request; the
// servers only read them.
var (
	octetStream     = []string{"application/octet-stream"}
	applicationJSON = []string{"application/json"}
)

func (a *api) v1Status(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	writeJSON(w, a.b.Status())
}

func (a *api) v1Cluster(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	writeJSON(w, a.b.Cluster(r.Context()))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// parsePut reads a PUT's options and body, answering 400/413 itself.
func (a *api) parsePut(w http.ResponseWriter, r *http.Request, conditional bool) (kv.WriteOptions, []byte, bool) {
	opts, err := a.writeOptions(r, conditional)
	if err == nil {
		opts.Index, err = parseIndexHeaders(r.Header)
	}
	if err != nil {
		badRequest(w, err.Error())
		return opts, nil, false
	}
	body, ok := a.readBody(w, r)
	return opts, body, ok
}
