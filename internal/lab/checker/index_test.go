package checker

import (
	"slices"
	"testing"
)

func TestIndexExpectationFromHistory(t *testing.T) {
	w := func(key, term string, out Outcome, call int64) IndexWrite {
		return IndexWrite{Key: key, Term: term, Outcome: out, Call: call, Delete: term == "" && key == "deleted"}
	}
	writes := []IndexWrite{
		w("kept", "g1", OK, 1),
		w("moved", "g1", OK, 1), w("moved", "g2", OK, 5), // to another term
		w("stripped", "g1", OK, 1), w("stripped", "", OK, 6), // overwritten without a term
		w("deleted", "g1", OK, 1), w("deleted", "", OK, 7),
		w("refused", "g1", Fail, 3),  // a 412: never applied
		w("maybe", "g1", Unknown, 4), // may or may not have applied
		w("maybe-gone", "g1", OK, 1), w("maybe-gone", "", Unknown, 9),
		w("late", "g1", OK, 10), w("late", "g2", OK, 2), // recorded out of order
	}
	e := ExpectIndex(writes)
	req := func(term string) []string {
		var ks []string
		for k := range e[term].Required {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got := req("g1"); !slices.Equal(got, []string{"kept", "late"}) {
		t.Fatalf("g1 required %v", got)
	}
	if got := req("g2"); !slices.Equal(got, []string{"moved"}) {
		t.Fatalf("g2 required %v", got)
	}
	for _, k := range []string{"maybe", "maybe-gone"} {
		if !e["g1"].Allowed[k] || e["g1"].Required[k] {
			t.Fatalf("%s: allowed %v required %v, want allowed only", k, e["g1"].Allowed[k], e["g1"].Required[k])
		}
	}

	// A correct answer passes; each kind of wrong answer is named.
	good := map[string][]string{"g1": {"kept", "late", "maybe"}, "g2": {"moved"}}
	if m, u, n := IndexMismatch(writes, good); len(m)+len(u) != 0 || n != 3 {
		t.Fatalf("correct answer: missing %v unexpected %v required %d", m, u, n)
	}
	bad := map[string][]string{"g1": {"kept", "stripped", "deleted", "refused", "moved", "kept"}, "g2": {}}
	m, u, _ := IndexMismatch(writes, bad)
	if !slices.Equal(m, []string{"g1 late", "g2 moved"}) {
		t.Fatalf("missing %v", m)
	}
	if !slices.Equal(u, []string{"g1 deleted", "g1 kept (returned twice)", "g1 moved", "g1 refused", "g1 stripped"}) {
		t.Fatalf("unexpected %v", u)
	}
}
