package checker

import (
	"math"

	"github.com/anishathalye/porcupine"
)

// The bounded form of a history: the check between the lighter form and
// the whole history (Linearizable).
//
// The lighter form drops the writes of unknown outcome whose value no one
// saw. When a compare-and-set that definitely failed needs one of them to
// have taken effect (the value it expected was replaced, by a write whose
// client got an error, and overwritten again before anyone read it), the
// lighter form is not linearizable, and the whole history, where each
// unknown write may take effect at any time after its call, can take
// exponential time to search. The bounded form keeps those writes, as
// writes that either took effect within boundedSpan of their call or never
// did: the model's state is the set of values the register may hold
// (porcupine's nondeterministic models), so "took effect or not" costs no
// branching. It allows fewer behaviours than the whole history (an
// unknown write may really take effect later), so when it is linearizable
// so is the history; when it is not, the whole history is checked.

// boundedSpan is how long after its call an unknown write may take effect
// in the bounded form: longer than a client's request timeout and a
// fault's length, so a write that took effect at all usually did by then.
const boundedSpan = int64(30e9)

// maybeOutput is the output of an operation of unknown outcome in the
// bounded form: it took effect before its return, or never.
type maybeOutput struct{ regOutput }

// boundedModel is registerModel over sets of possible values.
var boundedModel = (&porcupine.NondeterministicModel{
	Partition: registerModel.Partition,
	Init:      func() []interface{} { return []interface{}{""} },
	Step: func(state, input, output interface{}) []interface{} {
		s := state.(string)
		in := input.(keyed).in
		if _, maybe := output.(maybeOutput); maybe {
			if in.kind == Write || in.kind == CAS && s == in.expected {
				return []interface{}{in.value, s}
			}
			return []interface{}{s}
		}
		if ok, next := registerModel.Step(s, input, output); ok {
			return []interface{}{next}
		}
		return nil
	},
	Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
}).ToModel()

// bounded returns the bounded form of h: as lighter, but the writes and
// compare-and-sets of unknown outcome that lighter would drop or leave
// open end boundedSpan after their call, took effect or not.
func bounded(h []Op) []porcupine.Operation {
	light, _ := lighten(h, false)
	var ops []porcupine.Operation
	for _, o := range light {
		var out interface{} = regOutput{value: o.Value, ok: o.Kind == CAS && o.Outcome == OK}
		ret := o.Return
		switch {
		case o.Outcome == Fail && o.Kind != CAS, o.Outcome == Unknown && o.Kind == Read:
			continue
		case o.Outcome == Unknown:
			out = maybeOutput{regOutput{value: o.Value, unknown: true}}
			ret = o.Call + boundedSpan
			if ret < o.Call { // overflow
				ret = math.MaxInt64
			}
		}
		ops = append(ops, porcupine.Operation{
			ClientId: o.Client,
			Input:    keyed{key: o.Key, in: regInput{kind: o.Kind, value: o.Value, expected: o.Expected}},
			Call:     o.Call, Output: out, Return: ret,
		})
	}
	return ops
}
