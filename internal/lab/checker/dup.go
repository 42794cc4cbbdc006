package checker

import (
	"fmt"
	"sort"
)

// AppliedTwice finds the writes of a history that took effect more than
// once. Every write carries a unique value, and each application of a
// command gives its key a new version, so:
//
//   - a value seen at two versions (an acknowledgement or a read) was
//     applied twice: a retry under the same request id was applied again
//     instead of being answered from the node's dedup record;
//   - a compare-and-set answered "condition failed" (412) whose value is
//     read afterwards, or anywhere, was applied by an earlier attempt and
//     then evaluated again by a retry (which no longer matched).
//
// It returns one line per finding, sorted; none for a clean history.
// Linearizability catches some of these too, but only when the reads fall
// where the double application contradicts them.
func AppliedTwice(history []Op) []string {
	type kv struct{ key, value string }
	versions := map[kv]map[uint64]bool{}
	failedCAS := map[kv]bool{}
	seen := map[kv]bool{}
	note := func(k kv, v uint64) {
		if v == 0 || k.value == "" {
			return
		}
		if versions[k] == nil {
			versions[k] = map[uint64]bool{}
		}
		versions[k][v] = true
	}
	for _, op := range history {
		k := kv{op.Key, op.Value}
		switch {
		case op.Kind == Read && op.Outcome == OK:
			note(k, op.Version)
			if op.Value != "" {
				seen[k] = true
			}
		case op.Kind != Read && op.Outcome == OK:
			note(k, op.Version)
		case op.Kind == CAS && op.Outcome == Fail:
			failedCAS[k] = true
		}
	}
	var out []string
	for k, vs := range versions {
		if len(vs) > 1 {
			var list []uint64
			for v := range vs {
				list = append(list, v)
			}
			sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
			out = append(out, fmt.Sprintf("%s: value %q at versions %v (applied %d times)", k.key, k.value, list, len(list)))
		}
	}
	for k := range failedCAS {
		if seen[k] {
			out = append(out, fmt.Sprintf("%s: compare-and-set to %q answered 412 but its value was read (applied, then evaluated again)", k.key, k.value))
		}
	}
	sort.Strings(out)
	return out
}
