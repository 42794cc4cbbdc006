package statemachine

import (
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

// A request id names one write: a retry of it gets the first answer, but
// a different command under the same id is refused (409 to the client)
// and changes nothing — it is not answered with the first write's result.
func TestReusedRequestIDWithAnotherCommandIsRefused(t *testing.T) {
	put := func(key, value string) wire.Command {
		return wire.Command{RequestID: []byte("id-1"), Op: wire.OpPut, Key: []byte(key), Value: []byte(value)}
	}
	alpha := put("alpha", "a")
	others := map[string]wire.Command{
		"another key":   put("beta", "a"),
		"another value": put("alpha", "b"),
		"a delete":      {RequestID: []byte("id-1"), Op: wire.OpDelete, Key: []byte("alpha")},
		"a condition":   {RequestID: []byte("id-1"), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte("alpha"), Value: []byte("a")},
		"a version":     {RequestID: []byte("id-1"), Op: wire.OpPut, Cond: wire.CondIfMatch, Version: 1, Key: []byte("alpha"), Value: []byte("a")},
	}
	for name, other := range others {
		t.Run(name, func(t *testing.T) {
			m := testMachine(t)
			// The first write and the other one in separate rounds and in
			// one round (the record is then still in the round's batch).
			res := applyAll(m, []wire.Command{alpha, other, alpha}, func() int { return 1 })
			m2 := testMachine(t)
			res2 := applyAll(m2, []wire.Command{alpha, other, alpha}, func() int { return 3 })
			for _, r := range [][]Result{res, res2} {
				if r[0].Status != wire.StatusOK {
					t.Fatalf("first write: %+v", r[0])
				}
				if r[1].Status != wire.StatusRequestIDReused {
					t.Fatalf("other command under the same id answered %+v, want request id reused", r[1])
				}
				if r[2].Result != r[0].Result {
					t.Fatalf("retry of the first write: %+v, want %+v", r[2], r[0])
				}
			}
			for _, mm := range []*Machine{m, m2} {
				if _, err := mm.Get([]byte("beta")); err != ErrNotFound {
					t.Fatalf("beta: %v, want absent", err)
				}
				v, err := mm.Get([]byte("alpha"))
				if err != nil || string(v.Data) != "a" || v.Version != 1 {
					t.Fatalf("alpha: %q v%d %v, want the first write's", v.Data, v.Version, err)
				}
			}
			if len(dump(t, m.cfg.Engine)) != len(dump(t, m2.cfg.Engine)) {
				t.Fatal("batching changed the state")
			}
		})
	}
}

// The record keeps the command's fingerprint through a restart (the
// index reloads from the engine).
func TestReusedRequestIDRefusedAfterReload(t *testing.T) {
	m := testMachine(t)
	alpha := wire.Command{RequestID: []byte("id-2"), Op: wire.OpPut, Key: []byte("alpha"), Value: []byte("a")}
	applyAll(m, []wire.Command{alpha}, func() int { return 1 })
	m2, err := Open(Config{ShardID: 1, Engine: m.cfg.Engine, DedupTTL: m.cfg.DedupTTL, VersionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	beta := alpha
	beta.Key = []byte("beta")
	rd := m2.Begin(nil)
	res := m2.applyCommand(rd, 2, &beta)
	if err := m2.Commit(rd); err != nil {
		t.Fatal(err)
	}
	if res.Status != wire.StatusRequestIDReused {
		t.Fatalf("after reload: %+v", res)
	}
	if _, err := m2.Get([]byte("beta")); err != ErrNotFound {
		t.Fatalf("beta: %v, want absent", err)
	}
}
