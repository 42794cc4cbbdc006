package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// singleFields are the header fields that mean one value: a
// precondition, the credentials, the request id. Given twice, a reader
// taking the first would act on half of what the client (or a proxy
// that added one) sent.
var singleFields = [...]string{"If-Match", "If-None-Match", "Authorization", "Cairn-Request-Id"}

// repeatedField reports the first header field of singleFields, or query
// parameter, that r carries more than once. Every query parameter of the
// API (and of the token routes) takes one value.
func repeatedField(r *http.Request) error {
	for _, name := range singleFields {
		if n := len(r.Header[name]); n > 1 {
			return fmt.Errorf("the header field %s is given %d times: send it once", name, n)
		}
	}
	if name, n := repeatedParam(r.URL.RawQuery); n > 1 {
		return fmt.Errorf("the query parameter %q is given %d times: send it once", name, n)
	}
	return nil
}

// smallQuery is how many parameters repeatedParam compares pairwise,
// without allocating; a longer query is counted in a map.
const smallQuery = 16

// repeatedParam returns the first parameter of the query raw (in order)
// given more than once and how many times, or n < 2. Names are compared
// unescaped, as url.ParseQuery reads them; it is on every request's path,
// so a query of a few parameters costs no allocation.
func repeatedParam(raw string) (name string, n int) {
	if !strings.Contains(raw, "&") {
		return "", 0 // at most one parameter
	}
	var buf [smallQuery]string
	names := buf[:0]
	for rest := raw; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair == "" {
			continue
		}
		key, _, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(key, "%+") {
			if k, err := url.QueryUnescape(key); err == nil {
				key = k
			}
		}
		names = append(names, key)
	}
	if len(names) > smallQuery {
		count := make(map[string]int, len(names))
		for _, k := range names {
			count[k]++
		}
		for _, k := range names {
			if count[k] > 1 {
				return k, count[k]
			}
		}
		return "", 0
	}
	for i, k := range names {
		n := 1
		for _, l := range names[i+1:] {
			if l == k {
				n++
			}
		}
		if n > 1 {
			return k, n
		}
	}
	return "", 0
}

// RefuseRepeated answers 400 to a request that carries a header field
// meaning one value (If-Match, If-None-Match, Authorization,
// Cairn-Request-Id), or any query parameter, more than once; others go
// to next. The API's handler (New) does it itself; the node puts it in
// front of the token checks as well, which read Authorization and the
// token routes' parameters before the API sees the request.
func RefuseRepeated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := repeatedField(r); err != nil {
			badRequest(w, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}
