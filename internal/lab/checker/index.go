package checker

import (
	"fmt"
	"sort"
)

// IndexWrite is one recorded write of an indexed object: a PUT whose
// object carries Term in the checked index afterwards ("": a PUT without
// a term in it, or a DELETE).
type IndexWrite struct {
	Key     string  `json:"key"`
	Term    string  `json:"term,omitempty"`
	Delete  bool    `json:"delete,omitempty"`
	Outcome Outcome `json:"outcome"`
	// Call orders one key's writes: every key is written by one client
	// at a time, so its acknowledged writes do not overlap.
	Call int64 `json:"call"`
}

// IndexExpectation is what an index query after healing must answer for
// one term: Required keys (their last acknowledged write carried the term
// and no write of unknown outcome could have changed that) and Allowed
// keys (Required ones and those a write of unknown outcome may have left
// with the term). Any other key is forbidden: never written with the
// term, or overwritten or deleted away by an acknowledged write.
type IndexExpectation struct {
	Required map[string]bool
	Allowed  map[string]bool
}

// ExpectIndex derives, for every term the writes name, which keys an
// index query on it after healing must and may return. A key's possible
// final terms are the term of its last acknowledged write ("" before
// any: absent) and the term of every write whose outcome is unknown
// (it may have taken effect at any time after its call, as the
// linearizability check assumes too); failed writes changed nothing.
func ExpectIndex(writes []IndexWrite) map[string]IndexExpectation {
	byKey := map[string][]IndexWrite{}
	terms := map[string]bool{}
	for _, w := range writes {
		byKey[w.Key] = append(byKey[w.Key], w)
		if w.Term != "" {
			terms[w.Term] = true
		}
	}
	out := map[string]IndexExpectation{}
	for t := range terms {
		out[t] = IndexExpectation{Required: map[string]bool{}, Allowed: map[string]bool{}}
	}
	for key, ws := range byKey {
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].Call < ws[b].Call })
		final := ""
		possible := map[string]bool{}
		for _, w := range ws {
			switch w.Outcome {
			case OK:
				final = w.Term
			case Unknown:
				possible[w.Term] = true
			}
		}
		possible[final] = true
		for t, e := range out {
			if !possible[t] {
				continue
			}
			e.Allowed[key] = true
			if len(possible) == 1 {
				e.Required[key] = true
			}
		}
	}
	return out
}

// IndexMismatch compares what index queries after healing returned
// (term -> keys, in the order of the pages) with ExpectIndex(writes):
// missing lists "term key" for every required key not returned,
// unexpected every forbidden key returned and every key returned twice.
func IndexMismatch(writes []IndexWrite, got map[string][]string) (missing, unexpected []string, required int) {
	for term, e := range ExpectIndex(writes) {
		required += len(e.Required)
		seen := map[string]bool{}
		for _, k := range got[term] {
			switch {
			case seen[k]:
				unexpected = append(unexpected, fmt.Sprintf("%s %s (returned twice)", term, k))
			case !e.Allowed[k]:
				unexpected = append(unexpected, fmt.Sprintf("%s %s", term, k))
			}
			seen[k] = true
		}
		for k := range e.Required {
			if !seen[k] {
				missing = append(missing, fmt.Sprintf("%s %s", term, k))
			}
		}
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	return missing, unexpected, required
}
