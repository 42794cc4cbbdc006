package wire

import (
	"fmt"
	"testing"
)

// A scan asking for terms says so in a flag older nodes ignore; a result
// with terms is version 2 (only such a scan gets one), any other stays
// version 1, byte for byte.
func TestScanTermsRoundTrip(t *testing.T) {
	q := ScanRequest{Shards: []ScanShard{{ID: 1}}, From: []byte("a"), Limit: 10, Linearizable: true, Terms: true}
	var q2 ScanRequest
	if err := q2.Unmarshal(q.Marshal()); err != nil || !q2.Terms || !q2.Linearizable || q2.KeysOnly {
		t.Fatalf("request: %+v %v", q2, err)
	}
	q.Terms = false
	if err := q2.Unmarshal(q.Marshal()); err != nil || q2.Terms {
		t.Fatalf("request without terms: %+v %v", q2, err)
	}
	lease := []IndexTerm{{Name: "etcd-lease_int", Term: EncodeIntTerm(42)}}
	r := ScanResult{Entries: []ScanEntry{
		{SortKey: []byte("a"), Key: []byte("a"), Version: 3, Value: []byte("1"), Terms: lease},
		{SortKey: []byte("b"), Key: []byte("b"), Version: 4, Value: []byte("2")},
	}, Last: []byte("b")}
	b := r.Marshal()
	if b[0] != scanV2 {
		t.Fatalf("a result with terms is version %d", b[0])
	}
	var r2 ScanResult
	if err := r2.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r2.Entries[0].Terms, len(r2.Entries[1].Terms), string(r2.Entries[1].Value), r2.Entries[1].Version); got != fmt.Sprint(lease, 0, "2", 4) {
		t.Fatalf("entries: %s", got)
	}
	// A truncated version-2 result is an error, not a panic.
	for i := range b {
		if err := new(ScanResult).Unmarshal(b[:i]); err == nil {
			t.Fatalf("%d of %d bytes decoded", i, len(b))
		}
	}
	r.Entries[0].Terms = nil
	if b := r.Marshal(); b[0] != scanV1 {
		t.Fatalf("a result without terms is version %d", b[0])
	}
}
