package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/http1"
	"github.com/cairn-db/cairn/internal/kv"
)

// ParseReplicas parses "ACK/FROM" strictly: two decimal integers with
// 1 <= ACK <= FROM <= rf.
func ParseReplicas(s string, rf int) (ack, from int, err error) {
	a, f, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("replicas %q: want ACK/FROM", s)
	}
	ack, err1 := parseSmall(a)
	from, err2 := parseSmall(f)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("replicas %q: ACK and FROM must be positive integers", s)
	}
	if ack < 1 || ack > from || from > rf {
		return 0, 0, fmt.Errorf("replicas %q: need 1 <= ACK <= FROM <= %d", s, rf)
	}
	return ack, from, nil
}

func parseSmall(s string) (int, error) {
	if s == "" || len(s) > 6 {
		return 0, errors.New("bad number")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad number")
		}
	}
	return strconv.Atoi(s)
}

// replicasParam returns the parsed replicas query parameter (zeros when
// absent).
func (a *api) replicasParam(r *http.Request) (int, int, error) {
	q := r.URL.Query()
	if _, ok := q["replicas"]; !ok {
		return 0, 0, nil
	}
	return ParseReplicas(q.Get("replicas"), a.b.ReplicationFactor())
}

// parseIfMatch parses If-Match: "123" (or 123). A well-formed strong
// entity tag that is not a version Cairn could have made ("abc", a number
// past 2^64) is a precondition that is false, not a bad request: it parses
// as version 0, which no key ever has (versions are log indexes, from 1),
// so the write answers 412 as for any other version that does not match.
func parseIfMatch(h string) (uint64, error) {
	h = strings.TrimSpace(h)
	if strings.HasPrefix(h, "W/") {
		return 0, errors.New("weak ETags are not supported in If-Match")
	}
	quoted := len(h) >= 2 && h[0] == '"' && h[len(h)-1] == '"'
	if quoted {
		h = h[1 : len(h)-1]
	}
	v, err := strconv.ParseUint(h, 10, 64)
	switch {
	case err == nil:
		return v, nil
	case quoted && isETagc(h):
		return 0, nil
	default:
		return 0, fmt.Errorf("If-Match %q: want a quoted version number", h)
	}
}

// isETagc reports whether s is the inside of a well-formed entity tag
// (RFC 9110 etagc: '!' or '#'..'~' or obs-text; no '"', space or control).
func isETagc(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != 0x21 && (c < 0x23 || c == 0x7f) {
			return false
		}
	}
	return true
}

// writeOptions reads replicas, conditions and the request id of a write;
// conditional is false for a route without conditions, which refuses them.
func (a *api) writeOptions(r *http.Request, conditional bool) (kv.WriteOptions, error) {
	var o kv.WriteOptions
	var err error
	if o.Ack, o.From, err = a.replicasParam(r); err != nil {
		return o, err
	}
	if id := r.Header.Get("Cairn-Request-Id"); id != "" {
		if len(id) > 32 {
			return o, errors.New("Cairn-Request-Id longer than 32 bytes")
		}
		for i := 0; i < len(id); i++ {
			if c := id[i]; c < 0x20 || c > 0x7e {
				return o, fmt.Errorf("Cairn-Request-Id: byte %#02x at %d is not printable ASCII", c, i)
			}
		}
		o.RequestID = []byte(id)
	}
	im, inm := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	if !conditional {
		// Ignoring a condition would write where the client asked not to.
		for name, v := range map[string]string{"If-Match": im, "If-None-Match": inm} {
			if v != "" {
				return o, fmt.Errorf("%s is not served on /v0/entity (its writes have no conditions): use /v1/kv/{key}", name)
			}
		}
		return o, nil
	}
	switch {
	case im != "" && inm != "":
		return o, errors.New("If-Match and If-None-Match cannot be combined")
	case im != "":
		if o.Version, err = parseIfMatch(im); err != nil {
			return o, err
		}
		o.Cond = kv.CondIfMatch
	case inm != "":
		if strings.TrimSpace(inm) != "*" {
			return o, errors.New("only If-None-Match: * is supported")
		}
		o.Cond = kv.CondIfAbsent
	}
	return o, nil
}

// readBody reads the value, answering 413 itself when it is too large.
func (a *api) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > int64(a.cfg.MaxValueSize) {
		writeError(w, http.StatusRequestEntityTooLarge, "value_too_large",
			fmt.Sprintf("value of %d bytes is over the limit of %d", r.ContentLength, a.cfg.MaxValueSize))
		return nil, false
	}
	if b, ok := r.Body.(*http1.Body); ok && len(b.Bytes()) <= a.cfg.MaxValueSize {
		return b.Bytes(), true // the HTTP/1.1 server read it whole already
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.cfg.MaxValueSize)))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "value_too_large",
				fmt.Sprintf("value is over the limit of %d bytes", a.cfg.MaxValueSize))
		} else {
			badRequest(w, "reading body: "+err.Error())
		}
		return nil, false
	}
	return body, true
}

func (a *api) checkKey(w http.ResponseWriter, key []byte) bool {
	if len(key) == 0 {
		badRequest(w, "empty key")
		return false
	}
	if len(key) > a.cfg.MaxKeySize {
		badRequest(w, fmt.Sprintf("key of %d bytes is over the limit of %d", len(key), a.cfg.MaxKeySize))
		return false
	}
	if cluster.IsReserved(key) {
		writeError(w, http.StatusBadRequest, "reserved_key", "keys beginning with byte 0x00 are reserved for the system")
		return false
	}
	return true
}
