package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestIndexNames(t *testing.T) {
	for _, ok := range []string{"email_bin", "age_int", "a-b_c9_bin", "X_int"} {
		if err := ValidIndexName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "_bin", "email", "email_str", "e mail_bin", "e\x00_bin", "é_bin", strings.Repeat("a", 61) + "_bin"} {
		if err := ValidIndexName(bad); !errors.Is(err, ErrBadIndex) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	if _, err := ParseIndexTerm("age_int", "12x"); !errors.Is(err, ErrBadIndex) {
		t.Errorf("non-integer _int term accepted: %v", err)
	}
	if tm, err := ParseIndexTerm("age_int", " -42"); err != nil || tm.Text() != "-42" {
		t.Errorf("-42: %v %v", tm, err)
	}
	if _, err := ParseIndexTerm("e_bin", strings.Repeat("x", MaxIndexTermSize+1)); !errors.Is(err, ErrBadIndex) {
		t.Errorf("long _bin term accepted: %v", err)
	}
}

func TestNormalizeIndex(t *testing.T) {
	a, _ := ParseIndexTerm("b_bin", "x")
	b, _ := ParseIndexTerm("a_int", "3")
	got, err := NormalizeIndex([]IndexTerm{a, b, a})
	if err != nil || len(got) != 2 || got[0].Name != "a_int" || got[1].Name != "b_bin" {
		t.Fatalf("got %v %v", got, err)
	}
	var many []IndexTerm
	for i := 0; i <= MaxIndexTerms; i++ {
		many = append(many, IndexTerm{Name: "n_int", Term: EncodeIntTerm(int64(i))})
	}
	if _, err := NormalizeIndex(many); !errors.Is(err, ErrBadIndex) {
		t.Fatalf("%d terms accepted: %v", len(many), err)
	}
}

// The bounds of NormalizeIndex are on distinct terms: copies are dropped
// first, however many (the kv coordinator's writes, and the HTTP API's
// after its own reading, rely on it).
func TestNormalizeIndexBoundsDistinctTerms(t *testing.T) {
	var copies []IndexTerm
	for c := 0; c < 300; c++ {
		for i := 0; i < MaxIndexTerms; i++ {
			copies = append(copies, IndexTerm{Name: "n_int", Term: EncodeIntTerm(int64(i))})
		}
	}
	got, err := NormalizeIndex(copies)
	if err != nil || len(got) != MaxIndexTerms {
		t.Fatalf("%d copies of %d terms: %d terms, %v", len(copies), MaxIndexTerms, len(got), err)
	}
	big := func(c byte) IndexTerm {
		return IndexTerm{Name: "e_bin", Term: bytes.Repeat([]byte{c}, MaxIndexTermSize)}
	}
	copies = copies[:0]
	for c := 0; c < 300; c++ {
		for b := byte('a'); b < 'a'+15; b++ {
			copies = append(copies, big(b))
		}
	}
	if got, err := NormalizeIndex(copies); err != nil || len(got) != 15 {
		t.Fatalf("300 copies of 15 KiB of terms: %d terms, %v", len(got), err)
	}
	if _, err := NormalizeIndex(append(copies, big('z'))); !errors.Is(err, ErrBadIndex) {
		t.Fatalf("16 distinct terms of %d bytes accepted: %v", MaxIndexTermSize, err)
	}
}

// A command with terms round-trips under the new encoding; one without
// keeps the old encoding and fingerprint; terms change the fingerprint.
func TestCommandWithIndex(t *testing.T) {
	terms, _ := NormalizeIndex([]IndexTerm{{Name: "e_bin", Term: []byte("a@b")}, {Name: "n_int", Term: EncodeIntTerm(-1)}})
	c := Command{RequestID: []byte("id"), Op: OpPut, Key: []byte("k"), Value: []byte("v"), Index: terms}
	b := c.Marshal()
	if b[0] != commandV3 {
		t.Fatalf("encoding version %d", b[0])
	}
	var d Command
	if err := d.Unmarshal(b); err != nil || len(d.Index) != 2 || d.Index[1].Text() != "-1" {
		t.Fatalf("round trip: %+v %v", d, err)
	}
	plain := c
	plain.Index = nil
	if plain.Marshal()[0] != commandV2 {
		t.Fatal("a command without terms changed encoding")
	}
	if plain.Fingerprint() == c.Fingerprint() {
		t.Fatal("index terms do not change the fingerprint")
	}
	other := c
	other.Index = terms[:1]
	if other.Fingerprint() == c.Fingerprint() {
		t.Fatal("different terms, same fingerprint")
	}
	del := Command{Op: OpDelete, Key: []byte("k"), Index: terms}
	if err := d.Unmarshal(del.Marshal()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a delete with terms decoded: %v", err)
	}
}

func TestScanRoundTrip(t *testing.T) {
	q := ScanRequest{Index: "e_bin", Shards: []ScanShard{{ID: 1, Epoch: 2, Start: 3, End: 0}}, From: []byte("a"),
		After: []byte{}, Limit: 10, MaxBytes: 1 << 20, KeysOnly: true, Linearizable: true}
	var q2 ScanRequest
	if err := q2.Unmarshal(q.Marshal()); err != nil || q2.Index != "e_bin" || len(q2.Shards) != 1 || q2.Shards[0].Start != 3 ||
		q2.After == nil || q2.To != nil || !q2.KeysOnly || !q2.Linearizable || q2.Limit != 10 {
		t.Fatalf("got %+v %v", q2, err)
	}
	r := ScanResult{Entries: []ScanEntry{{SortKey: []byte("sk"), Key: []byte("k"), Value: []byte("v"), Version: 5}}, More: true, Last: []byte("sk"), Failed: []uint64{4}}
	var r2 ScanResult
	if err := r2.Unmarshal(r.Marshal()); err != nil || len(r2.Entries) != 1 || !bytes.Equal(r2.Entries[0].Value, []byte("v")) ||
		!r2.More || len(r2.Failed) != 1 {
		t.Fatalf("got %+v %v", r2, err)
	}
	resp := Response{Status: StatusOK, Size: 9, Terms: q2Terms()}
	var resp2 Response
	if err := resp2.Unmarshal(resp.Marshal()); err != nil || resp2.Size != 9 || len(resp2.Terms) != 1 {
		t.Fatalf("response meta: %+v %v", resp2, err)
	}
}

func q2Terms() []IndexTerm { return []IndexTerm{{Name: "e_bin", Term: []byte("x")}} }
