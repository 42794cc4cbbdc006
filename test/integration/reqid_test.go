package integration

import (
	"fmt"
	"testing"
)

// testRequestIDReuse: a PUT sent under the Cairn-Request-Id of an earlier
// PUT to another key of the same shard (where the id is remembered) is
// refused with 409 request_id_reused through every node, and writes
// nothing; the true retry still gets the first answer.
func testRequestIDReuse(t *testing.T, c *cluster) {
	const id = "it-reuse-0123456789"
	var keys []string
	for n := 0; n < 200; n++ {
		keys = append(keys, fmt.Sprint("reuse-beta-", n))
	}
	shards := c.shardOf(1, append(keys, "reuse-alpha"))
	beta := ""
	for _, k := range keys {
		if shards[k] == shards["reuse-alpha"] {
			beta = k
			break
		}
	}
	if beta == "" {
		t.Fatal("no key of alpha's shard among 200")
	}
	v := v1Write(t, c.do("PUT", c.v1URL(1, "reuse-alpha", ""), []byte("a"), "Cairn-Request-Id", id), 201, "PUT alpha")
	for j := 1; j <= 3; j++ {
		r := c.do("PUT", c.v1URL(j, beta, ""), []byte("b"), "Cairn-Request-Id", id)
		if code, ok := errorCode(r); r.code != 409 || !ok || code != "request_id_reused" {
			t.Fatalf("PUT beta under alpha's request id via node %d: %v (%s), want 409 request_id_reused", j, r, code)
		}
		if r := c.do("GET", c.v1URL(j, beta, ""), nil); r.code != 404 {
			t.Fatalf("beta via node %d after the refused PUT: %v, want 404", j, r)
		}
		// An unconditional put answered from its record reports 200: the
		// record does not keep whether it created the key.
		if got := v1Write(t, c.do("PUT", c.v1URL(j, "reuse-alpha", ""), []byte("a"), "Cairn-Request-Id", id), 200, fmt.Sprint("retry of alpha via node ", j)); got != v {
			t.Fatalf("retry of alpha via node %d: version %d, want %d", j, got, v)
		}
	}
}
