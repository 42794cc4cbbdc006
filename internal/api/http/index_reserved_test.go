package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/wire"
)

// The etcd API's lease index is its own: an HTTP PUT cannot set its
// terms (the etcd API would report a lease the key does not have), and
// an index query over HTTP does not name keys beginning with 0x00 (the
// etcd API's keys that begin with 0x00), as a listing does not.
func TestEtcdLeaseIndexIsTheEtcdAPIs(t *testing.T) {
	f := newFake()
	h := mustNew(t, f, Config{})
	r := do(t, h, "PUT", "/v1/kv/k", strings.NewReader("v"), map[string]string{"X-Cairn-Index-etcd-lease_int": "7"})
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, "etcd API") {
		t.Fatalf("PUT with an etcd-lease_int term: %d %s, want 400 naming the etcd API", r.code, r.body)
	}
	if _, ok := f.data["k"]; ok {
		t.Fatal("the refused PUT wrote k")
	}
	lease := []wire.IndexTerm{{Name: wire.EtcdLeaseIndex, Term: wire.EncodeIntTerm(7)}}
	f.mu.Lock()
	f.data["\x00\xff\x00hidden"] = kv.Value{Data: []byte("x"), Version: 1, Index: lease}
	f.data["visible"] = kv.Value{Data: []byte("y"), Version: 2, Index: lease}
	f.mu.Unlock()
	r = do(t, h, "GET", "/v1/index/etcd-lease_int/7", nil, nil)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"visible"`) || strings.Contains(r.body, "hidden") {
		t.Fatalf("index query: %d %s, want visible only", r.code, r.body)
	}
}
