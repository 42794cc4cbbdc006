package storage

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// Index sort keys order by term (integer order for _int, byte order for
// _bin whatever bytes the terms hold) and then by key, and split back.
func TestIndexSortKeyOrder(t *testing.T) {
	ints := []int64{math.MinInt64, -1 << 40, -300, -2, -1, 0, 1, 2, 255, 256, 1 << 40, math.MaxInt64}
	var in []tk
	for _, v := range ints {
		in = append(in, tk{wire.EncodeIntTerm(v), "b"}, tk{wire.EncodeIntTerm(v), "a"})
	}
	checkOrder(t, "age_int", in, func(a, b tk) int {
		x, _ := wire.DecodeIntTerm(a.term)
		y, _ := wire.DecodeIntTerm(b.term)
		switch {
		case x != y:
			return cmpInt(x, y)
		}
		return cmpStr(a.key, b.key)
	})
	bins := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\xff\x00"}
	in = nil
	for _, v := range bins {
		for _, k := range []string{"", "\x00", "k", "\xff"} {
			in = append(in, tk{[]byte(v), k})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	checkOrder(t, "email_bin", in, func(a, b tk) int {
		if c := bytes.Compare(a.term, b.term); c != 0 {
			return c
		}
		return cmpStr(a.key, b.key)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpStr(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) }

type tk struct {
	term []byte
	key  string
}

func checkOrder(t *testing.T, name string, in []tk, want func(a, b tk) int) {
	t.Helper()
	byKey := slices.Clone(in)
	slices.SortFunc(byKey, func(x, y tk) int {
		return bytes.Compare(IndexKey(name, x.term, []byte(x.key)), IndexKey(name, y.term, []byte(y.key)))
	})
	byValue := slices.Clone(in)
	slices.SortFunc(byValue, want)
	for i := range byKey {
		a, b := byKey[i], byValue[i]
		if !bytes.Equal(a.term, b.term) || a.key != b.key {
			t.Fatalf("%s: position %d: encoded order has (%q, %q), want (%q, %q)", name, i, a.term, a.key, b.term, b.key)
		}
		sk := IndexSortKey(name, a.term, []byte(a.key))
		term, key, err := SplitIndexSortKey(name, sk)
		if err != nil || !bytes.Equal(term, a.term) || string(key) != a.key {
			t.Fatalf("%s: split %x: (%q, %q, %v), want (%q, %q)", name, sk, term, key, err, a.term, a.key)
		}
	}
}

func TestValueMetaRoundTrip(t *testing.T) {
	terms := []wire.IndexTerm{{Name: "a_bin", Term: []byte("x")}, {Name: "n_int", Term: wire.EncodeIntTerm(-5)}}
	b := EncodeValueMeta(42, terms, []byte("data"))
	v, got, data, err := DecodeValueMeta(b)
	if err != nil || v != 42 || string(data) != "data" || len(got) != 2 || got[1].Text() != "-5" {
		t.Fatalf("got %d %v %q %v", v, got, data, err)
	}
	if v, data, err := DecodeValue(b); err != nil || v != 42 || string(data) != "data" {
		t.Fatalf("DecodeValue: %d %q %v", v, data, err)
	}
	// Values without terms keep the old encoding.
	if !bytes.Equal(EncodeValueMeta(7, nil, []byte("d")), EncodeValue(7, []byte("d"))) {
		t.Fatal("a value without terms changed encoding")
	}
	for i := 8; i < len(b)-4; i++ {
		if _, _, _, err := DecodeValueMeta(b[:i]); err == nil {
			t.Fatalf("truncated metadata (%d bytes) decoded", i)
		}
	}
}

// An object without index terms writes its key-order entry when it is
// created and nothing when it is overwritten; a delete removes the entry.
func TestDerivedWritesOfPlainObjects(t *testing.T) {
	var sets, dels [][]byte
	set := func(k, _ []byte) { sets = append(sets, k) }
	del := func(k []byte) { dels = append(dels, k) }
	DerivedWrites(7, []byte("k"), nil, false, nil, false, del, set)
	if len(sets) != 1 || !bytes.Equal(sets[0], KeyOrderKey([]byte("k"))) || len(dels) != 0 {
		t.Fatalf("create: sets %q dels %q, want the key-order entry set", sets, dels)
	}
	sets, dels = nil, nil
	DerivedWrites(7, []byte("k"), nil, true, nil, false, del, set)
	if len(sets) != 0 || len(dels) != 0 {
		t.Fatalf("overwrite: sets %q dels %q, want no write", sets, dels)
	}
	DerivedWrites(7, []byte("k"), nil, true, nil, true, del, set)
	if len(sets) != 0 || len(dels) != 1 || !bytes.Equal(dels[0], KeyOrderKey([]byte("k"))) {
		t.Fatalf("delete: sets %q dels %q, want the key-order entry deleted", sets, dels)
	}
}

// An overwrite of an indexed object sets only its new terms and deletes
// only the terms it no longer has; its key-order entry and the terms it
// keeps are not written again.
func TestDerivedWritesOfIndexedObjects(t *testing.T) {
	var sets, dels []string
	set := func(k, v []byte) {
		if tok, err := DerivedToken(v); err != nil || tok != 7 {
			t.Fatalf("entry %q set to %x", k, v)
		}
		sets = append(sets, string(k))
	}
	del := func(k []byte) { dels = append(dels, string(k)) }
	term := func(name, v string) wire.IndexTerm { return wire.IndexTerm{Name: name, Term: []byte(v)} }
	key := func(t wire.IndexTerm) string { return string(IndexKey(t.Name, t.Term, []byte("k"))) }
	a, b, c := term("x_bin", "a"), term("x_bin", "b"), term("y_bin", "a")
	DerivedWrites(7, []byte("k"), nil, false, []wire.IndexTerm{a, b}, false, del, set)
	if want := []string{string(KeyOrderKey([]byte("k"))), key(a), key(b)}; !slices.Equal(sets, want) || dels != nil {
		t.Fatalf("create: sets %q dels %q, want sets %q", sets, dels, want)
	}
	sets = nil
	DerivedWrites(7, []byte("k"), []wire.IndexTerm{a, b}, true, []wire.IndexTerm{b, c}, false, del, set)
	if !slices.Equal(sets, []string{key(c)}) || !slices.Equal(dels, []string{key(a)}) {
		t.Fatalf("overwrite: sets %q dels %q, want %q set and %q deleted", sets, dels, key(c), key(a))
	}
	sets, dels = nil, nil
	DerivedWrites(7, []byte("k"), []wire.IndexTerm{b, c}, true, nil, true, del, set)
	if want := []string{string(KeyOrderKey([]byte("k"))), key(b), key(c)}; sets != nil || !slices.Equal(dels, want) {
		t.Fatalf("delete: sets %q dels %q, want %q deleted", sets, dels, want)
	}
}
