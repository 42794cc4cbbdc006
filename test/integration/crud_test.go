package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// valueLimit is the --max-value-size of the shared healthy cluster.
const valueLimit = 1024

// TestHealthyCluster runs the tests that leave a cluster healthy on one
// shared three-node cluster; each uses its own keys.
func TestHealthyCluster(t *testing.T) {
	c := newCluster(t, 3, "--max-value-size", fmt.Sprint(valueLimit))
	t.Run("V0CRUDThroughEveryNode", func(t *testing.T) { testV0CRUD(t, c) })
	t.Run("V1CRUDThroughEveryNode", func(t *testing.T) { testV1CRUD(t, c) })
	t.Run("V1Conditional", func(t *testing.T) { testV1Conditional(t, c) })
	t.Run("V1Head", func(t *testing.T) { testV1Head(t, c) })
	t.Run("KeyBytesRoundTrip", func(t *testing.T) { testKeyBytes(t, c) })
	t.Run("ReplicasVariants", func(t *testing.T) { testReplicasVariants(t, c) })
	t.Run("BadReplicasChangeNothing", func(t *testing.T) { testBadReplicas(t, c) })
	t.Run("BadInputChangesNothing", func(t *testing.T) { testBadInput(t, c) })
	t.Run("RequestIDs", func(t *testing.T) { testRequestIDs(t, c) })
	t.Run("RequestIDReuse", func(t *testing.T) { testRequestIDReuse(t, c) })
	t.Run("StatusClusterMetrics", func(t *testing.T) { testEndpoints(t, c) })
	t.Run("LeaseReads", func(t *testing.T) { testLeaseReads(t, c) })
	t.Run("HTTP2WithoutTLS", func(t *testing.T) { testH2C(t, c) })
	t.Run("BackupRoute", func(t *testing.T) { testBackupRoute(t, c) })
}

// testH2C: every node also speaks HTTP/2 without TLS (prior knowledge), and
// a write over it is read back over HTTP/1.1 through another node.
func testH2C(t *testing.T, c *cluster) {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	for i := 1; i <= 3; i++ {
		key := fmt.Sprintf("h2c-%d", i)
		req, err := http.NewRequest("PUT", c.v1URL(i, key, ""), strings.NewReader("over h2 "+key))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := h2.Do(req)
		if err != nil {
			t.Fatalf("h2c PUT via node %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != 201 {
			t.Fatalf("h2c PUT via node %d: %s %d, want HTTP/2 201", i, resp.Proto, resp.StatusCode)
		}
		readEverywhere(t, c, key, "over h2 "+key)
	}
}

// readEverywhere checks that a linearizable v0 and v1 GET through every
// node returns want.
func readEverywhere(t *testing.T, c *cluster, key, want string) {
	t.Helper()
	for j := 1; j <= 3; j++ {
		if r := c.get0(j, key, ""); r.code != 200 || r.body != want {
			t.Fatalf("v0 GET %q via node %d: %v, want 200 %q", key, j, r, want)
		}
		r := c.do("GET", c.v1URL(j, key, ""), nil)
		if r.code != 200 || r.body != want {
			t.Fatalf("v1 GET %q via node %d: %v, want 200 %q", key, j, r, want)
		}
		if ct := r.h.Get("Content-Type"); ct != "application/octet-stream" {
			t.Fatalf("v1 GET %q via node %d: Content-Type %q", key, j, ct)
		}
		if _, ok := version(r); !ok {
			t.Fatalf("v1 GET %q via node %d: ETag %q is not a quoted version", key, j, r.h.Get("ETag"))
		}
	}
}

// absentEverywhere checks that v0 GET, v1 GET and v1 HEAD through every node
// answer 404 (JSON not_found for the GETs).
func absentEverywhere(t *testing.T, c *cluster, key string) {
	t.Helper()
	for j := 1; j <= 3; j++ {
		for _, r := range []result{c.get0(j, key, ""), c.do("GET", c.v1URL(j, key, ""), nil)} {
			if code, ok := errorCode(r); r.code != 404 || !ok || code != "not_found" {
				t.Fatalf("GET of absent %q via node %d: %v (%s), want 404 not_found", key, j, r, code)
			}
		}
		if r := c.do("HEAD", c.v1URL(j, key, ""), nil); r.code != 404 || r.body != "" {
			t.Fatalf("HEAD of absent %q via node %d: %v, want 404 without body", key, j, r)
		}
	}
}

func testV0CRUD(t *testing.T, c *cluster) {
	for w := 1; w <= 3; w++ {
		key := fmt.Sprint("v0crud-", w)
		if r := c.put0(w, key, "first-"+key, ""); r.code != 201 || r.body != "" {
			t.Fatalf("v0 PUT %s via node %d: %v, want 201 with an empty body", key, w, r)
		}
		readEverywhere(t, c, key, "first-"+key)
		// Overwrite through another node: v0 PUT always answers 201.
		if r := c.put0(w%3+1, key, "second-"+key, ""); r.code != 201 {
			t.Fatalf("v0 overwrite of %s via node %d: %v", key, w%3+1, r)
		}
		readEverywhere(t, c, key, "second-"+key)
		if r := c.del0((w+1)%3+1, key, ""); r.code != 202 {
			t.Fatalf("v0 DELETE %s via node %d: %v, want 202", key, (w+1)%3+1, r)
		}
		absentEverywhere(t, c, key)
		// Deleting again (an absent key) is still 202 on v0.
		if r := c.del0(w, key, ""); r.code != 202 {
			t.Fatalf("v0 DELETE of absent %s: %v, want 202", key, r)
		}
		// A deleted key can be written again.
		if r := c.put0(w, key, "third", ""); r.code != 201 {
			t.Fatalf("v0 PUT after DELETE: %v", r)
		}
		readEverywhere(t, c, key, "third")
	}
	absentEverywhere(t, c, "v0crud-never-written")
	if r := c.put0(1, "v0crud-empty", "", ""); r.code != 201 {
		t.Fatalf("v0 PUT of an empty value: %v", r)
	}
	readEverywhere(t, c, "v0crud-empty", "")
	for j := 1; j <= 3; j++ {
		if r := c.do("GET", c.url(j)+"/v0/status", nil); r.code != 200 || r.body != "OK" {
			t.Fatalf("GET /v0/status via node %d: %v, want 200 OK", j, r)
		}
	}
}

// v1Write checks a v1 PUT's answer: want status, ETag "N" equal to the
// JSON body's version; it returns N.
func v1Write(t *testing.T, r result, want int, what string) uint64 {
	t.Helper()
	if r.code != want {
		t.Fatalf("%s: %v, want %d", what, r, want)
	}
	v, ok := version(r)
	if !ok || v == 0 {
		t.Fatalf("%s: ETag %q is not a quoted non-zero version", what, r.h.Get("ETag"))
	}
	var body struct {
		Version *uint64 `json:"version"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body.Version == nil || *body.Version != v {
		t.Fatalf("%s: body %q, want {\"version\": %d} (as the ETag)", what, r.body, v)
	}
	return v
}

func testV1CRUD(t *testing.T, c *cluster) {
	for w := 1; w <= 3; w++ {
		key := fmt.Sprint("v1crud-", w)
		v := v1Write(t, c.do("PUT", c.v1URL(w, key, ""), []byte("a")), 201, "v1 PUT create")
		readEverywhere(t, c, key, "a")
		// Versions grow with every write, through whichever node.
		for n := 0; n < 4; n++ {
			via := (w+n)%3 + 1
			val := fmt.Sprint("b", n)
			nv := v1Write(t, c.do("PUT", c.v1URL(via, key, ""), []byte(val)), 200, fmt.Sprintf("v1 overwrite %d via node %d", n, via))
			if nv <= v {
				t.Fatalf("version did not grow: %d then %d", v, nv)
			}
			v = nv
			for j := 1; j <= 3; j++ {
				r := c.do("GET", c.v1URL(j, key, ""), nil)
				if got, _ := version(r); r.code != 200 || r.body != val || got != v {
					t.Fatalf("v1 GET via node %d after write %d: %v ETag %q, want %q version %d", j, n, r, r.h.Get("ETag"), val, v)
				}
			}
		}
		// v0 and v1 share one key space, both ways.
		if r := c.put0(w, key, "from-v0", ""); r.code != 201 {
			t.Fatalf("v0 PUT of a v1 key: %v", r)
		}
		r := c.do("GET", c.v1URL(w%3+1, key, ""), nil)
		if got, _ := version(r); r.code != 200 || r.body != "from-v0" || got <= v {
			t.Fatalf("v1 GET after a v0 PUT: %v ETag %q, want from-v0 with a version above %d", r, r.h.Get("ETag"), v)
		}
		if r := c.do("DELETE", c.v1URL((w+1)%3+1, key, ""), nil); r.code != 204 || r.body != "" {
			t.Fatalf("v1 DELETE: %v, want 204 without body", r)
		}
		absentEverywhere(t, c, key)
		if code, ok := errorCode(c.do("DELETE", c.v1URL(w, key, ""), nil)); code != "not_found" || !ok {
			t.Fatalf("v1 DELETE of an absent key: %s, want 404 not_found", code)
		}
		// Re-created after a delete: 201 again.
		v1Write(t, c.do("PUT", c.v1URL(w, key, ""), []byte("again")), 201, "v1 PUT after DELETE")
		readEverywhere(t, c, key, "again")
	}
	// An empty key is 400.
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		r := c.do(m, c.url(1)+"/v1/kv/", []byte("x"))
		if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
			t.Fatalf("%s /v1/kv/ (empty key): %v (%s), want 400 bad_request", m, r, code)
		}
	}
	// An unknown path is a JSON 404.
	r := c.do("GET", c.url(2)+"/v1/nothing-here", nil)
	if code, ok := errorCode(r); r.code != 404 || !ok || code != "not_found" {
		t.Fatalf("unknown path: %v (%s), want 404 not_found", r, code)
	}
}

func testV1Conditional(t *testing.T, c *cluster) {
	key := "cond"
	precond := func(r result, what string) {
		t.Helper()
		if code, ok := errorCode(r); r.code != 412 || !ok || code != "precondition_failed" {
			t.Fatalf("%s: %v (%s), want 412 precondition_failed", what, r, code)
		}
	}
	bad := func(r result, what string) {
		t.Helper()
		if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
			t.Fatalf("%s: %v (%s), want 400 bad_request", what, r, code)
		}
	}
	// If-Match on an absent key fails; nothing is created.
	precond(c.do("PUT", c.v1URL(1, key, ""), []byte("x"), "If-Match", `"1"`), "If-Match on an absent key")
	absentEverywhere(t, c, key)
	v1 := v1Write(t, c.do("PUT", c.v1URL(1, key, ""), []byte("one"), "If-None-Match", "*"), 201, "If-None-Match: * create")
	for j := 1; j <= 3; j++ {
		precond(c.do("PUT", c.v1URL(j, key, ""), []byte("x"), "If-None-Match", "*"), fmt.Sprint("If-None-Match: * on an existing key via node ", j))
		precond(c.do("PUT", c.v1URL(j, key, ""), []byte("x"), "If-Match", fmt.Sprintf(`"%d"`, v1+1)), fmt.Sprint("If-Match newer version via node ", j))
		precond(c.do("PUT", c.v1URL(j, key, ""), []byte("x"), "If-Match", fmt.Sprintf(`"%d"`, v1-1)), fmt.Sprint("If-Match older version via node ", j))
	}
	readEverywhere(t, c, key, "one")
	v2 := v1Write(t, c.do("PUT", c.v1URL(2, key, ""), []byte("two"), "If-Match", fmt.Sprintf(`"%d"`, v1)), 200, "If-Match current version")
	if v2 <= v1 {
		t.Fatalf("version did not grow: %d then %d", v1, v2)
	}
	// The old version no longer matches: compare-and-set succeeds once.
	precond(c.do("PUT", c.v1URL(3, key, ""), []byte("x"), "If-Match", fmt.Sprintf(`"%d"`, v1)), "If-Match the replaced version")
	readEverywhere(t, c, key, "two")
	// Malformed or conflicting conditions are 400 and change nothing.
	bad(c.do("PUT", c.v1URL(1, key, ""), []byte("x"), "If-Match", fmt.Sprintf(`"%d"`, v2), "If-None-Match", "*"), "If-Match with If-None-Match")
	bad(c.do("PUT", c.v1URL(1, key, ""), []byte("x"), "If-Match", `abc`), "If-Match abc (unquoted)")
	// A well-formed entity tag that is no version is a false precondition.
	precond(c.do("PUT", c.v1URL(1, key, ""), []byte("x"), "If-Match", `"no-such-version"`), "If-Match \"no-such-version\"")
	bad(c.do("DELETE", c.v1URL(1, key, ""), nil, "If-Match", "yesterday"), "DELETE If-Match yesterday")
	readEverywhere(t, c, key, "two")
	// Conditional delete.
	precond(c.do("DELETE", c.v1URL(3, key, ""), nil, "If-Match", fmt.Sprintf(`"%d"`, v1)), "DELETE If-Match stale")
	readEverywhere(t, c, key, "two")
	if r := c.do("DELETE", c.v1URL(3, key, ""), nil, "If-Match", fmt.Sprintf(`"%d"`, v2)); r.code != 204 {
		t.Fatalf("DELETE If-Match current: %v, want 204", r)
	}
	absentEverywhere(t, c, key)
	// After the delete, create-only works again and versions keep growing.
	v3 := v1Write(t, c.do("PUT", c.v1URL(2, key, ""), []byte("three"), "If-None-Match", "*"), 201, "If-None-Match: * after delete")
	if v3 <= v2 {
		t.Fatalf("version after delete and re-create: %d, not above %d", v3, v2)
	}
}

func testV1Head(t *testing.T, c *cluster) {
	key := "head/key"
	val := strings.Repeat("h", 321)
	v := v1Write(t, c.do("PUT", c.v1URL(1, key, ""), []byte(val)), 201, "PUT")
	for j := 1; j <= 3; j++ {
		for _, q := range []string{"", "consistency=linearizable"} {
			r := c.do("HEAD", c.v1URL(j, key, q), nil)
			got, _ := version(r)
			if r.code != 200 || r.body != "" || got != v || r.h.Get("Content-Length") != fmt.Sprint(len(val)) {
				t.Fatalf("HEAD %s via node %d: %v ETag %q Content-Length %q, want 200, no body, version %d, length %d",
					q, j, r, r.h.Get("ETag"), r.h.Get("Content-Length"), v, len(val))
			}
			g := c.do("GET", c.v1URL(j, key, q), nil)
			if g.h.Get("ETag") != r.h.Get("ETag") || g.h.Get("Content-Type") != r.h.Get("Content-Type") {
				t.Fatalf("HEAD and GET headers differ via node %d: %v vs %v", j, r.h, g.h)
			}
		}
	}
}

// testKeyBytes writes keys with awkward bytes through one node and reads
// them through every node, in the escaped forms the contract allows.
func testKeyBytes(t *testing.T, c *cluster) {
	keys := []string{
		"with/slash", "a//double", "trailing/", "/leading", "per%cent", "%2F-literal", "sp ace", " ",
		"\xff", "\xff\xfe-not-utf8", "nul\x00byte", "tab\tnew\nline", "q?uery#frag&x=y", "plus+sign",
		".", "..", "../up", "dot/./seg", "ünïcødé", strings.Repeat("k", 4096),
	}
	for i, k := range keys {
		w := i%3 + 1
		val := fmt.Sprint("value-", i)
		v1Write(t, c.do("PUT", c.v1URL(w, k, ""), []byte(val)), 201, fmt.Sprintf("PUT %.40q (sent as /v1/kv/%.60s)", k, escapeAll(k)))
		for j := 1; j <= 3; j++ {
			if r := c.do("GET", c.v1URL(j, k, ""), nil); r.code != 200 || r.body != val {
				t.Fatalf("GET %.40q via node %d (all bytes escaped): %v, want %q", k, j, r, val)
			}
			// The usual path escaping (RFC 3986 unreserved bytes and
			// sub-delims left alone), where it is unambiguous.
			if !strings.Contains("/"+k+"/", "/./") && !strings.Contains("/"+k+"/", "/../") {
				u := c.url(j) + "/v1/kv/" + url.PathEscape(k)
				if r := c.do("GET", u, nil); r.code != 200 || r.body != val {
					t.Fatalf("GET %.40q via node %d as %.80s: %v, want %q", k, j, u, r, val)
				}
			}
			// The same key through v0.
			if r := c.get0(j, k, ""); r.code != 200 || r.body != val {
				t.Fatalf("v0 GET id=%.40q via node %d: %v, want %q", k, j, r, val)
			}
		}
	}
	// An unescaped '/' is part of the key too: /v1/kv/dir/sub is "dir/sub".
	if r := c.do("PUT", c.url(1)+"/v1/kv/dir/sub", []byte("raw-slash")); r.code != 201 {
		t.Fatalf("PUT /v1/kv/dir/sub: %v", r)
	}
	readEverywhere(t, c, "dir/sub", "raw-slash")
	// Lower-case escapes name the same bytes.
	if r := c.do("GET", c.url(2)+"/v1/kv/%ff%fe-not-utf8", nil); r.code != 200 || r.body != fmt.Sprint("value-", 9) {
		t.Fatalf("GET /v1/kv/%%ff%%fe-not-utf8: %v", r)
	}
	// Deleting through v0 with the raw bytes removes the v1 key.
	if r := c.del0(3, "\xff", ""); r.code != 202 {
		t.Fatalf("v0 DELETE id=%%FF: %v", r)
	}
	absentEverywhere(t, c, "\xff")
}

// replicaVariants are the valid ACK/FROM settings for RF 3.
var replicaVariants = []string{"1/1", "1/2", "2/2", "1/3", "2/3", "3/3"}

func testReplicasVariants(t *testing.T, c *cluster) {
	for i, rep := range replicaVariants {
		key := "rep-" + strings.ReplaceAll(rep, "/", "-")
		w := i%3 + 1
		if r := c.put0(w, key, "v-"+rep, rep); r.code != 201 {
			t.Fatalf("PUT replicas=%s via node %d: %v, want 201", rep, w, r)
		}
		for j := 1; j <= 3; j++ {
			if rep[0] == '1' {
				// ACK 1 is served by one replica and may lag the write.
				eventually(t, 5*time.Second, func() string {
					if r := c.get0(j, key, rep); r.code != 200 || r.body != "v-"+rep {
						return fmt.Sprintf("GET replicas=%s via node %d: %v", rep, j, r)
					}
					return ""
				})
			} else if r := c.get0(j, key, rep); r.code != 200 || r.body != "v-"+rep {
				t.Fatalf("GET replicas=%s via node %d right after the write: %v, want 200 %q", rep, j, r, "v-"+rep)
			}
		}
		if r := c.del0(w%3+1, key, rep); r.code != 202 {
			t.Fatalf("DELETE replicas=%s: %v, want 202", rep, r)
		}
		absentEverywhere(t, c, key)
		for j := 1; j <= 3; j++ {
			eventually(t, 5*time.Second, func() string {
				if r := c.get0(j, key, rep); r.code != 404 {
					return fmt.Sprintf("GET replicas=%s of a deleted key via node %d: %v, want 404", rep, j, r)
				}
				return ""
			})
		}
	}
	// v1 GET takes replicas too.
	if r := c.put0(1, "rep-v1", "x", ""); r.code != 201 {
		t.Fatal(r)
	}
	for _, rep := range replicaVariants {
		if rep[0] == '1' {
			continue
		}
		if r := c.do("GET", c.v1URL(2, "rep-v1", "replicas="+rep), nil); r.code != 200 || r.body != "x" {
			t.Fatalf("v1 GET replicas=%s: %v", rep, r)
		}
	}
}

// badReplicas are malformed or out of range for RF 3.
var badReplicas = []string{"0/3", "4/3", "3/2", "a/b", "2", "/3", "1/", "1/3/3", "", "0/0", "-1/3", "2/4", "1.0/3", "2/3x"}

func testBadReplicas(t *testing.T, c *cluster) {
	key := "guarded-replicas"
	if r := c.put0(1, key, "original", ""); r.code != 201 {
		t.Fatal(r)
	}
	check := func(what string) {
		t.Helper()
		if r := c.get0(1, key, ""); r.code != 200 || r.body != "original" {
			t.Fatalf("after %s the key reads %v, want 200 \"original\"", what, r)
		}
	}
	for i, rep := range badReplicas {
		j := i%3 + 1
		for _, m := range []string{"PUT", "GET", "DELETE"} {
			r := c.do(m, c.v0URL(j, key, "")+"&replicas="+url.QueryEscape(rep), []byte("changed"))
			if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
				t.Fatalf("v0 %s replicas=%q via node %d: %v (%s), want 400 bad_request", m, rep, j, r, code)
			}
			if m != "GET" {
				check(fmt.Sprintf("v0 %s replicas=%q", m, rep))
			}
		}
		r := c.do("GET", c.v1URL(j, key, "replicas="+url.QueryEscape(rep)), nil)
		if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
			t.Fatalf("v1 GET replicas=%q: %v (%s), want 400 bad_request", rep, r, code)
		}
	}
	r := c.do("GET", c.v1URL(1, key, "consistency=eventual"), nil)
	if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
		t.Fatalf("v1 GET consistency=eventual: %v (%s), want 400 bad_request", r, code)
	}
	// Missing or empty id, with or without replicas.
	for _, q := range []string{"", "?id=", "?id=&replicas=2/3", "?replicas=2/3", "?ID=" + key, "?idx=" + key} {
		for _, m := range []string{"PUT", "GET", "DELETE"} {
			r := c.do(m, c.url(2)+"/v0/entity"+q, []byte("changed"))
			if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
				t.Fatalf("v0 %s /v0/entity%s: %v (%s), want 400 bad_request", m, q, r, code)
			}
		}
	}
	check("the bad requests")
	for j := 1; j <= 3; j++ {
		if r := c.get0(j, key, ""); r.code != 200 || r.body != "original" {
			t.Fatalf("node %d reads %v after the bad requests", j, r)
		}
	}
}

func testBadInput(t *testing.T, c *cluster) {
	key := "guarded-input"
	if r := c.put0(1, key, "original", ""); r.code != 201 {
		t.Fatal(r)
	}
	// Keys: 4096 bytes is the limit, 4097 is 400 on every route.
	long, tooLong := strings.Repeat("L", 4096), strings.Repeat("L", 4097)
	if r := c.put0(2, long, "max-key", ""); r.code != 201 {
		t.Fatalf("v0 PUT with a 4096-byte id: %v", r)
	}
	readEverywhere(t, c, long, "max-key")
	for _, req := range []struct{ m, u string }{
		{"PUT", c.v1URL(1, tooLong, "")}, {"GET", c.v1URL(2, tooLong, "")}, {"DELETE", c.v1URL(3, tooLong, "")},
		{"PUT", c.v0URL(1, tooLong, "")}, {"GET", c.v0URL(2, tooLong, "")}, {"DELETE", c.v0URL(3, tooLong, "")},
	} {
		r := c.do(req.m, req.u, []byte("x"))
		if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
			t.Fatalf("%s with a 4097-byte key: %v (%s), want 400 bad_request", req.m, r, code)
		}
	}
	if r := c.do("HEAD", c.v1URL(1, tooLong, ""), nil); r.code != 400 {
		t.Fatalf("HEAD with a 4097-byte key: %v, want 400", r)
	}
	// Values: the limit is accepted, one byte more is 413 — with a length
	// or chunked — and the old value stays.
	atLimit := strings.Repeat("v", valueLimit)
	if r := c.put0(3, "at-limit", atLimit, ""); r.code != 201 {
		t.Fatalf("v0 PUT of a %d-byte value (the limit): %v", valueLimit, r)
	}
	readEverywhere(t, c, "at-limit", atLimit)
	over := []byte(strings.Repeat("x", valueLimit+1))
	for j := 1; j <= 3; j++ {
		for _, u := range []string{c.v0URL(j, key, ""), c.v1URL(j, key, "")} {
			r := c.do("PUT", u, over)
			if code, ok := errorCode(r); r.code != 413 || !ok || code != "value_too_large" {
				t.Fatalf("PUT %d bytes to %s: %v (%s), want 413 value_too_large", len(over), u, r, code)
			}
			req, _ := http.NewRequest("PUT", u, io.MultiReader(strings.NewReader(string(over)))) // no length: chunked
			resp, err := c.hc.Do(req)
			if err != nil {
				t.Fatalf("chunked PUT of %d bytes to %s: %v", len(over), u, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Fatalf("chunked PUT of %d bytes to %s: %d, want 413", len(over), u, resp.StatusCode)
			}
		}
	}
	// Unsupported methods are 405 with Allow.
	for _, target := range []string{"/v0/entity?id=" + key, "/v1/kv/" + key} {
		for _, m := range []string{"PATCH", "POST"} {
			r := c.do(m, c.url(2)+target, []byte("changed"))
			if code, ok := errorCode(r); r.code != 405 || !ok || code != "method_not_allowed" || r.h.Get("Allow") == "" {
				t.Fatalf("%s %s: %v (%s) Allow %q, want 405 method_not_allowed with Allow", m, target, r, code, r.h.Get("Allow"))
			}
		}
	}
	readEverywhere(t, c, key, "original")
	for j := 1; j <= 3; j++ {
		if code, body, err := c.get(j, "/v1/status"); code != 200 {
			t.Fatalf("node %d status after bad input: %d %v %s", j, code, err, body)
		}
	}
}

// testRequestIDs: a write retried with the same Cairn-Request-Id, through
// any node, is applied once and answered with the first result.
func testRequestIDs(t *testing.T, c *cluster) {
	const id = "it-req-0123456789abcdef"
	first := c.do("PUT", c.v1URL(1, "reqid", ""), []byte("one"), "Cairn-Request-Id", id, "If-None-Match", "*")
	v := v1Write(t, first, 201, "first PUT with a request id")
	// Another client writes in between.
	v2 := v1Write(t, c.do("PUT", c.v1URL(2, "reqid", ""), []byte("two")), 200, "intervening PUT")
	for j := 1; j <= 3; j++ {
		// Without dedup the create-only retry would be 412, or overwrite "two".
		r := c.do("PUT", c.v1URL(j, "reqid", ""), []byte("one"), "Cairn-Request-Id", id, "If-None-Match", "*")
		if got := v1Write(t, r, 201, fmt.Sprint("retry via node ", j)); got != v {
			t.Fatalf("retry via node %d answered version %d, want the first attempt's %d", j, got, v)
		}
	}
	r := c.do("GET", c.v1URL(3, "reqid", ""), nil)
	if got, _ := version(r); r.code != 200 || r.body != "two" || got != v2 {
		t.Fatalf("after the retries: %v version %d, want \"two\" version %d (retries applied again)", r, got, v2)
	}
	// v0 writes dedup too: a retried PUT does not undo a later write.
	if r := c.do("PUT", c.v0URL(1, "reqid0", ""), []byte("a"), "Cairn-Request-Id", "it-v0-put"); r.code != 201 {
		t.Fatal(r)
	}
	if r := c.put0(2, "reqid0", "b", ""); r.code != 201 {
		t.Fatal(r)
	}
	if r := c.do("PUT", c.v0URL(3, "reqid0", ""), []byte("a"), "Cairn-Request-Id", "it-v0-put"); r.code != 201 {
		t.Fatalf("v0 retry: %v, want 201", r)
	}
	readEverywhere(t, c, "reqid0", "b")
	// 32 bytes is the longest id; 33 is 400 and writes nothing.
	if r := c.do("PUT", c.v1URL(1, "reqid-len", ""), []byte("x"), "Cairn-Request-Id", strings.Repeat("a", 32)); r.code != 201 {
		t.Fatalf("PUT with a 32-byte request id: %v", r)
	}
	for _, u := range []string{c.v1URL(2, "reqid-len", ""), c.v0URL(2, "reqid-len", "")} {
		for _, m := range []string{"PUT", "DELETE"} {
			r := c.do(m, u, []byte("y"), "Cairn-Request-Id", strings.Repeat("a", 33))
			if code, ok := errorCode(r); r.code != 400 || !ok || code != "bad_request" {
				t.Fatalf("%s %s with a 33-byte request id: %v (%s), want 400 bad_request", m, u, r, code)
			}
		}
	}
	readEverywhere(t, c, "reqid-len", "x")
}

// testEndpoints checks /v1/status, /v1/cluster, /metrics and /debug/pprof/
// on every node.
func testEndpoints(t *testing.T, c *cluster) {
	for j := 1; j <= 3; j++ {
		code, body, err := c.get(j, "/v1/status")
		var st struct {
			NodeID uint64 `json:"node_id"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.NodeID != uint64(j) {
			t.Fatalf("GET /v1/status via node %d: %d %v %.300s, want JSON with node_id %d", j, code, err, body, j)
		}
		ci, err := c.clusterInfo(j)
		if err != nil {
			t.Fatal(err)
		}
		if ci.NodeID != uint64(j) || ci.Replication != 3 || len(ci.Members) != 3 || len(ci.Shards) != 16 {
			t.Fatalf("GET /v1/cluster via node %d: node_id %d replication %d, %d members, %d shards; want %d, 3, 3, 16",
				j, ci.NodeID, ci.Replication, len(ci.Members), len(ci.Shards), j)
		}
		for _, s := range ci.Shards {
			seen := map[uint64]bool{}
			for _, r := range s.Replicas {
				seen[r] = true
			}
			if len(s.Replicas) != 3 || len(seen) != 3 || !seen[s.Leader] || s.Applied == 0 {
				t.Fatalf("node %d: shard %+v: want 3 distinct replicas, one of them the leader, applied > 0", j, s)
			}
		}
		code, body, err = c.get(j, "/metrics")
		if code != 200 || !strings.Contains(body, "# TYPE ") {
			t.Fatalf("GET /metrics via node %d: %d %v %.200s", j, code, err, body)
		}
		checkShardMetrics(t, j, body, ci.Shards)
		if j == 1 {
			checkDeployMetrics(t, body)
		}
		if code, _, err := c.get(j, "/debug/pprof/"); code != 200 {
			t.Fatalf("GET /debug/pprof/ via node %d: %d %v", j, code, err)
		}
	}
}

// checkShardMetrics checks the series the alerting rules watch: every
// shard's replica knows a leader, the shard leaders on this node report
// their followers' lag, and the log has been fsynced.
func checkShardMetrics(t *testing.T, node int, metrics string, shards []client.ShardInfo) {
	t.Helper()
	for _, s := range shards {
		if want := fmt.Sprintf("cairn_shard_has_leader{shard=\"%d\"} 1\n", s.ID); !strings.Contains(metrics, want) {
			t.Fatalf("node %d /metrics lacks %q", node, strings.TrimSpace(want))
		}
		if s.Leader == uint64(node) && !strings.Contains(metrics, "cairn_replica_lag_entries{follower=") {
			t.Fatalf("node %d leads shard %d but /metrics has no cairn_replica_lag_entries", node, s.ID)
		}
	}
	m := regexp.MustCompile(`(?m)^cairn_wal_fsync_duration_seconds_count (\d+)$`).FindStringSubmatch(metrics)
	if m == nil || m[1] == "0" {
		t.Fatalf("node %d /metrics: cairn_wal_fsync_duration_seconds_count %v, want a count above 0", node, m)
	}
}

// testLeaseReads: with --lease-reads (the default), linearizable reads in
// quick succession are answered by the shard's leader under its lease,
// without a quorum round each: cairn_lease_reads_total, summed over the
// nodes, grows by most of them. Each read still returns the last write.
func testLeaseReads(t *testing.T, c *cluster) {
	leaseReads := func() float64 {
		var sum float64
		for i := 1; i <= 3; i++ {
			sum += metric(t, c.hc, c.url(i), "cairn_lease_reads_total")
		}
		return sum
	}
	before := leaseReads()
	const n = 40
	for i := range n {
		node := 1 + i%3
		want := fmt.Sprintf("v%d", i)
		if r := c.put0(node, "lease-reads", want, ""); r.code != 200 && r.code != 201 && r.code != 204 {
			t.Fatalf("put through node %d: %s", node, r)
		}
		if r := c.get0(1+(i+1)%3, "lease-reads", ""); r.code != 200 || r.body != want {
			t.Fatalf("read after write %d: %s, want %q", i, r, want)
		}
	}
	if got := leaseReads() - before; got < n/2 {
		t.Fatalf("%d linearizable reads in a row: %v answered under a lease, want at least %d", n, got, n/2)
	}
}
