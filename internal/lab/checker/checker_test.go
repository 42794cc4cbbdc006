package checker

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func op(client int, kind Kind, key, value string, call, ret int64, out Outcome) Op {
	return Op{Client: client, Kind: kind, Key: key, Value: value, Call: call, Return: ret, Outcome: out}
}

func TestLinearizableHistoryPasses(t *testing.T) {
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		op(2, Read, "x", "a", 20, 30, OK),
		op(1, Write, "x", "b", 25, 40, Unknown), // may land any time after 25
		op(2, Read, "x", "b", 50, 60, OK),
		{Client: 3, Kind: CAS, Key: "x", Expected: "b", Value: "c", Call: 70, Return: 80, Outcome: OK},
		{Client: 1, Kind: CAS, Key: "x", Expected: "b", Value: "d", Call: 90, Return: 95, Outcome: Fail},
		op(2, Read, "x", "c", 100, 110, OK),
		op(2, Read, "y", "", 0, 5, OK),
	}
	ok, unknown, err := Linearizable(h, 10*time.Second, "")
	if !ok || unknown || err != nil {
		t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
	}
}

func TestStaleReadIsCaught(t *testing.T) {
	dir := t.TempDir()
	vis := filepath.Join(dir, "vis.html")
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		op(1, Write, "x", "b", 20, 30, OK),
		op(2, Read, "x", "a", 40, 50, OK), // stale: b was acknowledged before the read began
	}
	ok, unknown, err := Linearizable(h, 10*time.Second, vis)
	if ok || unknown || err != nil {
		t.Fatalf("stale read accepted: ok=%v unknown=%v err=%v", ok, unknown, err)
	}
	if st, err := os.Stat(vis); err != nil || st.Size() == 0 {
		t.Fatalf("no visualization written: %v", err)
	}
}

func TestFailedCASThatMatchedIsCaught(t *testing.T) {
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		{Client: 2, Kind: CAS, Key: "x", Expected: "a", Value: "b", Call: 20, Return: 30, Outcome: Fail},
	}
	if ok, _, _ := Linearizable(h, 10*time.Second, ""); ok {
		t.Fatal("a CAS reported failed although the value matched was accepted")
	}
}

func TestLostWrites(t *testing.T) {
	store := map[string]string{"a": "1", "b": "2"}
	acked := map[string]string{"a": "1", "b": "2", "c": "3"}
	lost, err := LostWrites(acked, func(k string) (string, bool, error) {
		v, ok := store[k]
		return v, ok, nil
	})
	if err != nil || len(lost) != 1 || lost[0] != "c" {
		t.Fatalf("lost %v err %v", lost, err)
	}
	store["b"] = "changed"
	if lost, _ := LostWrites(acked, func(k string) (string, bool, error) { v, ok := store[k]; return v, ok, nil }); len(lost) != 2 {
		t.Fatalf("overwritten value not reported: %v", lost)
	}
}

func TestDiverged(t *testing.T) {
	same := map[int][]ShardHash{
		1: {{Shard: 1, Applied: 9, Hash: "aa"}, {Shard: 2, Applied: 4, Hash: "bb"}},
		2: {{Shard: 1, Applied: 9, Hash: "aa"}, {Shard: 2, Applied: 4, Hash: "bb"}},
	}
	if d := Diverged(same); len(d) != 0 {
		t.Fatalf("identical replicas reported: %v", d)
	}
	same[3] = []ShardHash{{Shard: 1, Applied: 9, Hash: "aa"}, {Shard: 2, Applied: 4, Hash: "cc"}}
	if d := Diverged(same); len(d) != 1 {
		t.Fatalf("diverged shard 2 not reported: %v", d)
	}
}

// A failed compare-and-set can need an unknown write nobody read: without
// it the value matched. The pruned history is then not linearizable, and
// the whole one must still be found so.
func TestFailedCASNeedsUnobservedUnknownWrite(t *testing.T) {
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		op(2, Write, "x", "b", 20, 25, Unknown), // never read
		{Client: 3, Kind: CAS, Key: "x", Expected: "a", Value: "c", Call: 30, Return: 40, Outcome: Fail},
	}
	if p := lightOps(h); len(p) != 2 {
		t.Fatalf("pruned to %d ops, want the unknown write dropped", len(p))
	}
	ok, unknown, err := Linearizable(h, 10*time.Second, "")
	if !ok || unknown || err != nil {
		t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
	}
}

// Pruning keeps every unknown write a read or a compare-and-set observed,
// and a violation among the rest is still found.
func TestPruningKeepsObservedWritesAndViolations(t *testing.T) {
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		op(2, Write, "x", "u1", 12, 15, Unknown), // read below: kept
		op(3, Write, "x", "u2", 12, 15, Unknown), // expected by an unknown CAS: kept
		op(4, Write, "x", "u3", 12, 15, Unknown), // unseen: dropped
		{Client: 5, Kind: CAS, Key: "x", Expected: "u2", Value: "v", Call: 16, Return: 17, Outcome: Unknown},
		op(6, Read, "x", "u1", 20, 30, OK),
		op(1, Write, "x", "b", 40, 50, OK),
		op(6, Read, "x", "a", 60, 70, OK), // stale: b was acknowledged first
	}
	p := lightOps(h)
	if len(p) != len(h)-2 { // u3, and the unknown CAS (its value v is unseen)
		t.Fatalf("pruned to %d ops, want %d: %+v", len(p), len(h)-2, p)
	}
	for _, o := range p {
		if o.Value == "u3" || o.Value == "v" {
			t.Fatalf("kept unseen %q", o.Value)
		}
	}
	if ok, unknown, _ := Linearizable(h, 10*time.Second, ""); ok || unknown {
		t.Fatalf("stale read accepted: ok=%v unknown=%v", ok, unknown)
	}
}

// lightOps is lighter's history.
func lightOps(h []Op) []Op {
	l, _ := lighter(h)
	return l
}

// An unknown write a read certainly saw took effect before that read
// returned: lighter bounds it there (it no longer overlaps everything
// after it), and leaves one only an unknown compare-and-set expected as
// it was. A value that comes back after another write overwrote it is
// still found: the write took effect once.
func TestLighterBoundsObservedUnknownWrites(t *testing.T) {
	h := []Op{
		op(1, Write, "x", "a", 0, 10, OK),
		op(2, Write, "x", "u1", 12, 15, Unknown), // read by 6 at [20, 30] and [22, 35]
		op(3, Write, "x", "u2", 12, 15, Unknown), // only an unknown CAS expects it
		{Client: 5, Kind: CAS, Key: "x", Expected: "u2", Value: "v", Call: 16, Return: 17, Outcome: Unknown},
		op(6, Read, "x", "u1", 22, 35, OK),
		op(7, Read, "x", "u1", 20, 30, OK),
	}
	l := lightOps(h)
	for _, o := range l {
		if o.Kind != Write {
			continue
		}
		switch o.Value {
		case "u1":
			if o.Outcome != OK || o.Return != 30 {
				t.Fatalf("u1 lightened to %+v, want applied and returning at 30 (its first observer's return)", o)
			}
		case "u2":
			if o.Outcome != Unknown || o.Return != 15 {
				t.Fatalf("u2 lightened to %+v, want it left unknown", o)
			}
		}
	}
	if ok, unknown, err := Linearizable(h, 10*time.Second, ""); !ok || unknown || err != nil {
		t.Fatalf("ok=%v unknown=%v err=%v", ok, unknown, err)
	}
	// u1 read again after b overwrote it: not linearizable.
	h = append(h, op(1, Write, "x", "b", 40, 50, OK), op(6, Read, "x", "b", 55, 60, OK), op(7, Read, "x", "u1", 65, 70, OK))
	if ok, unknown, _ := Linearizable(h, 10*time.Second, ""); ok || unknown {
		t.Fatalf("a value back after it was overwritten accepted: ok=%v unknown=%v", ok, unknown)
	}
}
