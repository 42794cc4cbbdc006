package checker

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

type regInput struct {
	kind     Kind
	value    string
	expected string
}

type regOutput struct {
	value   string // read result
	ok      bool   // cas applied
	unknown bool
}

// registerModel is a key-value map of registers with compare-and-set,
// partitioned per key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(keyed).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s := state.(string)
		in := input.(keyed).in
		out := output.(regOutput)
		switch in.kind {
		case Read:
			return out.value == s, s
		case Write:
			return true, in.value
		default: // CAS
			if out.unknown {
				if s == in.expected {
					return true, in.value
				}
				return true, s
			}
			if out.ok {
				return s == in.expected, in.value
			}
			return s != in.expected, s
		}
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output interface{}) string {
		in := input.(keyed)
		out := output.(regOutput)
		switch in.in.kind {
		case Read:
			return fmt.Sprintf("get(%s) -> %q", in.key, out.value)
		case Write:
			return fmt.Sprintf("put(%s, %q)%s", in.key, in.in.value, unk(out))
		}
		return fmt.Sprintf("cas(%s, %q -> %q) -> %v%s", in.key, in.in.expected, in.in.value, out.ok, unk(out))
	},
}

func unk(o regOutput) string {
	if o.unknown {
		return " (unknown)"
	}
	return ""
}

type keyed struct {
	key string
	in  regInput
}

// ToPorcupine converts a history: reads that failed are dropped (they
// observed nothing), definite failures of writes are dropped (they did not
// happen), and unknown writes may take effect at any time after their call.
func ToPorcupine(h []Op) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, o := range h {
		ret := o.Return
		out := regOutput{value: o.Value}
		switch {
		case o.Outcome == Fail && o.Kind != CAS:
			continue
		case o.Outcome == Unknown && o.Kind == Read:
			continue
		case o.Outcome == Unknown:
			ret, out.unknown = math.MaxInt64, true
		}
		if o.Kind == CAS {
			out.ok = o.Outcome == OK
		}
		ops = append(ops, porcupine.Operation{
			ClientId: o.Client,
			Input:    keyed{key: o.Key, in: regInput{kind: o.Kind, value: o.Value, expected: o.Expected}},
			Call:     o.Call, Output: out, Return: ret,
		})
	}
	return ops
}

// Linearizable checks h. When it is not, and visualization is not empty,
// porcupine's HTML explanation is written there. A check that times out
// counts as not proven (false, with unknown=true).
//
// Writes of unknown outcome are what make the search slow: each may take
// effect at any time after its call, so it overlaps everything after it.
// The history is first checked in a lighter form (lighter): without those
// nobody observed, and with each observed one ending when its first
// observer returned. When that lighter history is linearizable, so is h
// (each dropped write can be placed after every other operation, where it
// changes nothing anyone saw; each bounded one had to take effect before
// its observer saw it anyway). When it is not (a compare-and-set that
// failed may need a dropped write to have failed), the bounded form is
// checked (bounded.go), and only when that is not linearizable either is
// h checked whole, so a violation is never reported because of either
// form. The three checks share the timeout (the bounded form at most
// half of what is left).
func Linearizable(h []Op, timeout time.Duration, visualization string) (ok bool, unknown bool, err error) {
	deadline := time.Now().Add(timeout)
	left := func() time.Duration { return max(time.Until(deadline), time.Millisecond) }
	if light, changed := lighter(h); changed {
		switch porcupine.CheckOperationsTimeout(registerModel, ToPorcupine(light), left()) {
		case porcupine.Ok:
			return true, false, nil
		case porcupine.Unknown: // the whole history would take longer still
			return false, true, nil
		}
		// Not linearizable without the unseen unknown writes: with them,
		// bounded in time (bounded.go), before the whole history.
		// At most half the time left, so that a history that is not
		// linearizable is still found so by the whole check.
		if porcupine.CheckOperationsTimeout(boundedModel, bounded(h), left()/2) == porcupine.Ok {
			return true, false, nil
		}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, ToPorcupine(h), left())
	switch res {
	case porcupine.Ok:
		return true, false, nil
	case porcupine.Unknown:
		return false, true, nil
	}
	if visualization != "" {
		err = porcupine.VisualizePath(registerModel, info, visualization)
	}
	return false, false, err
}

// lighter returns h with its writes and compare-and-sets of unknown
// outcome made cheaper to check, and whether it changed any:
//
//   - those whose value no operation saw are dropped: no read returned it
//     and no compare-and-set that succeeded, or may have, expected it.
//     Values identify writes (they are unique per write), so such a
//     write, if it took effect, was overwritten before anyone looked;
//   - those whose value an operation certainly saw (a read that returned
//     it, a compare-and-set that succeeded expecting it) took effect, and
//     before that operation returned: each ends (Return) when its first
//     such observer returned, instead of never. Nothing is lost: taking
//     effect later would contradict the observer.
func lighter(h []Op) ([]Op, bool) { return lighten(h, true) }

// lighten is lighter, keeping the unknown writes no one saw (as they
// are) unless dropUnseen.
func lighten(h []Op, dropUnseen bool) ([]Op, bool) {
	type kv = [2]string
	seen := map[kv]bool{}
	firstSeen := map[kv]int64{} // the earliest return of a certain observer
	for _, o := range h {
		var k kv
		var certain bool
		switch {
		case o.Kind == Read && o.Outcome == OK:
			k, certain = kv{o.Key, o.Value}, true
		case o.Kind == CAS && o.Outcome != Fail:
			k, certain = kv{o.Key, o.Expected}, o.Outcome == OK
		default:
			continue
		}
		seen[k] = true
		if r, ok := firstSeen[k]; certain && (!ok || o.Return < r) {
			firstSeen[k] = o.Return
		}
	}
	out := make([]Op, 0, len(h))
	changed := false
	for _, o := range h {
		if o.Kind != Read && o.Outcome == Unknown && o.Value != "" {
			k := kv{o.Key, o.Value}
			if !seen[k] && dropUnseen {
				changed = true
				continue
			}
			if r, ok := firstSeen[k]; ok {
				// Known to have taken effect by r: a write that
				// returned then (at least its call's instant later).
				o.Outcome, o.Return = OK, max(r, o.Call+1)
				if o.Kind == CAS {
					o.Outcome = OK // it took effect: its compare held
				}
				changed = true
			}
		}
		out = append(out, o)
	}
	return out, changed
}
