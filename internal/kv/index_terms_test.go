package kv_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/wire"
)

// indexAll pages through an index query and returns "term=key" for each
// match (the term as wire.IndexTerm.Text gives it).
func indexAll(t *testing.T, c *kv.Coordinator, opts kv.IndexQueryOptions) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("query does not end")
		}
		p, err := c.IndexQuery(ctx5(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			got = append(got, e.Term.Text()+"="+string(e.Key))
		}
		if !p.More {
			return got
		}
		opts.After = p.Last
	}
}

// An object with several terms in a query's range is listed once per
// term, in (term, key) order, also when a page ends between two of its
// terms (docs/http-api.md); _int bounds are inclusive up to the int64
// limits; _bin terms sort by bytes, a term before every longer term it
// begins (0x00 and 0xff bytes included: a < a\x00 < ab < a\xff); a term
// an overwrite dropped and a deleted object's terms are listed no more.
func TestIndexQueryTermsAndBounds(t *testing.T) {
	c := newCluster(t, 3, 4, replica.Config{})
	put := func(k string, terms ...wire.IndexTerm) {
		t.Helper()
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(k), []byte("v"), kv.WriteOptions{Index: terms}); err != nil {
			t.Fatal(err)
		}
	}
	n := func(v int64) wire.IndexTerm { return wire.IndexTerm{Name: "n_int", Term: wire.EncodeIntTerm(v)} }
	b := func(s string) wire.IndexTerm { return wire.IndexTerm{Name: "s_bin", Term: []byte(s)} }
	put("multi", n(-1), n(0), n(7), b("a"), b("a\x00"), b("a\xff"))
	put("min", n(math.MinInt64), b("\x00"))
	put("max", n(math.MaxInt64), b("\xff\xff"))
	put("other", n(7), b("ab"))
	put("gone", n(3), b("a"))
	put("moved", n(5), b("b"))

	if _, err := c.nodes[2].coord.Delete(ctx5(t), []byte("gone"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	put("moved", n(6)) // drops 5 and its s_bin term

	q := func(name string, start, end []byte) kv.IndexQueryOptions {
		return kv.IndexQueryOptions{Name: name, Start: start, End: end}
	}
	ints := []string{fmt.Sprint(int64(math.MinInt64)) + "=min", "-1=multi", "0=multi", "6=moved", "7=multi", "7=other", fmt.Sprint(int64(math.MaxInt64)) + "=max"}
	bins := []string{"\x00=min", "a=multi", "a\x00=multi", "ab=other", "a\xff=multi", "\xff\xff=max"}
	for _, tc := range []struct {
		opts kv.IndexQueryOptions
		want []string
	}{
		{q("n_int", wire.EncodeIntTerm(math.MinInt64), wire.EncodeIntTerm(math.MaxInt64)), ints},
		{q("n_int", wire.EncodeIntTerm(-1), wire.EncodeIntTerm(7)), ints[1:6]},
		{q("n_int", wire.EncodeIntTerm(0), wire.EncodeIntTerm(6)), ints[2:4]},
		{q("n_int", wire.EncodeIntTerm(math.MaxInt64), wire.EncodeIntTerm(math.MaxInt64)), ints[6:]},
		{q("n_int", wire.EncodeIntTerm(math.MinInt64), wire.EncodeIntTerm(math.MinInt64)), ints[:1]},
		{q("n_int", wire.EncodeIntTerm(3), wire.EncodeIntTerm(5)), nil},
		{q("s_bin", []byte("\x00"), []byte("\xff\xff\xff")), bins},
		{q("s_bin", []byte("a"), []byte("a")), bins[1:2]},
		{q("s_bin", []byte("a"), []byte("a\xff")), bins[1:5]},
		{q("s_bin", []byte("a\x00"), []byte("ab")), bins[2:4]},
		{q("s_bin", []byte("b"), []byte("b")), nil},
	} {
		for _, limit := range []int{1, 2, 100} {
			for _, cons := range []kv.Consistency{kv.Linearizable, kv.Serializable} {
				o := tc.opts
				o.Limit, o.Consistency = limit, cons
				var got []string
				eventually(t, 5*time.Second, func() error {
					got = indexAll(t, c.nodes[uint64(limit%3+1)].coord, o)
					if !slices.Equal(got, tc.want) {
						return fmt.Errorf("%s [%q, %q] limit %d consistency %d: got %q, want %q", o.Name, o.Start, o.End, limit, cons, got, tc.want)
					}
					return nil
				})
			}
		}
	}
}
