package checker

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const ms = int64(time.Millisecond)

// A compare-and-set that definitely failed because a write whose client
// got an error took effect and was overwritten before anyone read it:
// the lighter form (which drops that write) is not linearizable, the
// bounded form is, and so the history is, proven without the whole
// history's search.
func TestBoundedFormExplainsAFailedCompareAndSet(t *testing.T) {
	h := []Op{
		op(1, Write, "k", "a", 0, 10*ms, OK),
		op(2, Read, "k", "a", 20*ms, 30*ms, OK),
		op(3, Write, "k", "x", 35*ms, 40*ms, Unknown), // nobody reads x
		{Client: 4, Kind: CAS, Key: "k", Expected: "a", Value: "c", Call: 50 * ms, Return: 60 * ms, Outcome: Fail},
		op(1, Write, "k", "d", 70*ms, 80*ms, OK),
		op(2, Read, "k", "d", 90*ms, 100*ms, OK),
	}
	light, _ := lighter(h)
	if porcupine.CheckOperations(registerModel, ToPorcupine(light)) {
		t.Fatal("the lighter form is linearizable: the test does not reach the bounded form")
	}
	if !porcupine.CheckOperations(boundedModel, bounded(h)) {
		t.Fatal("the bounded form is not linearizable")
	}
	if ok, unknown, err := Linearizable(h, 10*time.Second, ""); !ok || unknown || err != nil {
		t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
	}
	// The unknown write may not have taken effect: without the failed
	// compare-and-set the bounded form is linearizable too.
	if !porcupine.CheckOperations(boundedModel, bounded(append(h[:3:3], h[4:]...))) {
		t.Fatal("the bounded form requires the unknown write to take effect")
	}
}

// The bounded form proves nothing that is not so: a failed
// compare-and-set that no write can explain (the unknown write's call
// came after it returned), or a value read that no write wrote, is
// still found not linearizable.
func TestBoundedFormKeepsViolations(t *testing.T) {
	for name, h := range map[string][]Op{
		"failed cas with the write after it": {
			op(1, Write, "k", "a", 0, 10*ms, OK),
			{Client: 4, Kind: CAS, Key: "k", Expected: "a", Value: "c", Call: 20 * ms, Return: 30 * ms, Outcome: Fail},
			op(3, Write, "k", "x", 40*ms, 50*ms, Unknown),
		},
		"a value never written": {
			op(1, Write, "k", "a", 0, 10*ms, OK),
			op(3, Write, "k", "x", 15*ms, 20*ms, Unknown),
			op(2, Read, "k", "y", 30*ms, 40*ms, OK),
		},
	} {
		if porcupine.CheckOperations(boundedModel, bounded(h)) {
			t.Errorf("%s: the bounded form is linearizable", name)
		}
		if ok, unknown, _ := Linearizable(h, 10*time.Second, ""); ok || unknown {
			t.Errorf("%s: ok=%v unknown=%v, want not linearizable", name, ok, unknown)
		}
	}
}
