package statemachine

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// testMachine opens a machine of shard 1 on a new engine, with a dedup
// TTL of one second and no version cache.
func testMachine(t *testing.T) *Machine { return testMachineB(t) }

// testMachineB is testMachine for tests and benchmarks.
func testMachineB(t testing.TB) *Machine {
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	m, err := Open(Config{ShardID: 1, Engine: eng, DedupTTL: time.Second, VersionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// withVersionCache gives m a version cache of n keys.
func withVersionCache(m *Machine, n int) *Machine {
	m.cfg.VersionCache, m.versions.max = n, n
	return m
}

// applyAll applies cmds, command j in the entry at index j+1 of term 1,
// unstamped, in rounds of the given sizes.
func applyAll(m *Machine, cmds []wire.Command, sizes func() int) []Result {
	return applyClocked(m, cmds, nil, sizes, nil)
}

// applyAllWaiting is applyAll on a replica that answers the writes whose
// request ids waiting reports.
func applyAllWaiting(m *Machine, cmds []wire.Command, sizes func() int, waiting func([]byte) bool) []Result {
	return applyClocked(m, cmds, nil, sizes, waiting)
}

// applyClocked is applyAll with the entry of command j stamped by the
// leader of term 1 with reading stamps[j] (none if 0 or stamps is nil).
func applyClocked(m *Machine, cmds []wire.Command, stamps []uint64, sizes func() int, waiting func([]byte) bool) []Result {
	var out []Result
	for i := 0; i < len(cmds); {
		n := min(sizes(), len(cmds)-i)
		out = append(out, applyRound(m, cmds, stamps, i, i+n, waiting)...)
		i += n
	}
	return out
}

// applyRound applies cmds[from:to] as applyClocked does, in one round.
func applyRound(m *Machine, cmds []wire.Command, stamps []uint64, from, to int, waiting func([]byte) bool) []Result {
	rd := m.Begin(waiting)
	for j := from; j < to; j++ {
		data := cmds[j].Marshal()
		if stamps != nil && stamps[j] != 0 {
			data = wire.MarshalStamped(stamps[j], [][]byte{data})
		}
		m.ApplyEntry(rd, uint64(j+1), 1, data)
	}
	if err := m.Commit(rd); err != nil {
		panic(err)
	}
	var out []Result
	for _, a := range rd.Applied() {
		out = append(out, a.Result)
	}
	return out
}

func dump(t *testing.T, e *storage.Engine) [][2][]byte {
	it, err := e.NewIter(nil, []byte{0xff})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out [][2][]byte
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	return out
}

// The state machine must reach the same state and answers whatever the
// batch boundaries (they differ between replicas): conditions, dedup and
// dedup pruning read the logical state, not the last committed batch.
func TestApplyIsIndependentOfBatching(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var cmds []wire.Command
	var stamps []uint64
	ts := uint64(1e12)
	for i := 0; i < 3000; i++ {
		ts += uint64(rng.Intn(5)) * uint64(time.Millisecond) * 10
		stamps = append(stamps, ts)
		key := []byte(fmt.Sprint("k", rng.Intn(20)))
		c := wire.Command{RequestID: []byte(fmt.Sprint("id", rng.Intn(400))), Op: wire.OpPut, Key: key, Value: []byte(fmt.Sprint(i))}
		switch rng.Intn(6) {
		case 0:
			c.Op = wire.OpDelete
		case 1:
			c.Cond = wire.CondIfAbsent
		case 2:
			c.Cond, c.Version = wire.CondIfMatch, uint64(rng.Intn(i+1))
		}
		cmds = append(cmds, c)
	}
	// b also keeps the versions of a few keys in memory (fewer than the
	// keys written, so it evicts): the cache must not change a result.
	a, b := testMachine(t), withVersionCache(testMachine(t), 7)
	ra := applyClocked(a, cmds, stamps, func() int { return 1 }, nil)
	rb := applyClocked(b, cmds, stamps, func() int { return 1 + rng.Intn(97) }, nil)
	if len(b.versions.m) != 7 {
		t.Fatalf("version cache holds %d keys, want 7", len(b.versions.m))
	}
	for i := range ra {
		if ra[i] != rb[i] {
			t.Fatalf("command %d: result %+v with one batch per command, %+v with random batches", i, ra[i], rb[i])
		}
	}
	da, db := dump(t, a.cfg.Engine), dump(t, b.cfg.Engine)
	if len(da) != len(db) {
		t.Fatalf("%d keys vs %d keys", len(da), len(db))
	}
	for i := range da {
		if !bytes.Equal(da[i][0], db[i][0]) || !bytes.Equal(da[i][1], db[i][1]) {
			t.Fatalf("key %d differs: %x=%x vs %x=%x", i, da[i][0], da[i][1], db[i][0], db[i][1])
		}
	}
	// Pruning happened (the TTL is one second of shard clock) and bounded
	// the table: far fewer records than ids ever used remain.
	dedups := 0
	for _, kv := range da {
		if p := storage.DedupPrefix(1); bytes.HasPrefix(kv[0], p) && len(kv[0]) > len(p) {
			dedups++
		}
	}
	if dedups == 0 || dedups >= 400 {
		t.Fatalf("%d dedup records after pruning", dedups)
	}
}

func TestDedupReturnsFirstResult(t *testing.T) {
	r := testMachine(t)
	put := wire.Command{RequestID: []byte("once"), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte("k"), Value: []byte("v")}
	res := applyAll(r, []wire.Command{put, put}, func() int { return 1 })
	if res[0].Status != wire.StatusOK || !res[0].Created || res[1].Result != res[0].Result {
		t.Fatalf("first %+v, retry %+v", res[0], res[1])
	}
}

// The in-memory dedup filter must never hide a record Pebble holds: a
// replica that reloads it from the engine now and then (as a restart or a
// snapshot does) reaches the same results and state as one that never does,
// and retries are answered from the table.
func TestDedupIndexReloadMatches(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	var cmds []wire.Command
	var stamps []uint64
	ts := uint64(1e12)
	for i := 0; i < 3000; i++ {
		ts += uint64(rng.Intn(5)) * uint64(time.Millisecond) * 10
		stamps = append(stamps, ts)
		c := wire.Command{RequestID: []byte(fmt.Sprint("id", rng.Intn(300))), Op: wire.OpPut,
			Key: []byte(fmt.Sprint("k", rng.Intn(20))), Value: []byte(fmt.Sprint(i))}
		if rng.Intn(4) == 0 {
			c.Cond = wire.CondIfAbsent
		}
		cmds = append(cmds, c)
	}
	a, b := testMachine(t), testMachine(t)
	ra := applyClocked(a, cmds, stamps, func() int { return 1 + rng.Intn(50) }, nil)
	var rb []Result
	for i := 0; i < len(cmds); {
		n := min(1+rng.Intn(50), len(cmds)-i)
		rb = append(rb, applyRound(b, cmds, stamps, i, i+n, nil)...)
		if rng.Intn(3) == 0 {
			// As a restart or a snapshot does.
			if err := b.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		i += n
	}
	for i := range ra {
		if ra[i] != rb[i] {
			t.Fatalf("command %d: %+v without reloads, %+v with", i, ra[i], rb[i])
		}
	}
	da, db := dump(t, a.cfg.Engine), dump(t, b.cfg.Engine)
	if len(da) == 0 || len(da) != len(db) {
		t.Fatalf("%d keys vs %d keys", len(da), len(db))
	}
	for i := range da {
		if !bytes.Equal(da[i][0], db[i][0]) || !bytes.Equal(da[i][1], db[i][1]) {
			t.Fatalf("key %d differs", i)
		}
	}
	// The commands span about 60 s of shard clock, 240 buckets of 250 ms;
	// pruning keeps the last five or so.
	if n := len(b.dedup.order); n == 0 || n > 6 {
		t.Fatalf("%d buckets in the filter: pruning did not run", n)
	}
}

// The batch commits in key order, so its range deletions must still cover
// exactly what came before them in the round.
func TestApplyBatchOrdersRangeDeletions(t *testing.T) {
	r := testMachine(t)
	pre := newApplyBatch(r.cfg.Engine)
	pre.Set([]byte("k/c"), []byte("old c"))
	pre.Set([]byte("k/d"), []byte("old d"))
	pre.Set([]byte("z"), []byte("old z"))
	if err := pre.commit(); err != nil {
		t.Fatal(err)
	}
	b := newApplyBatch(r.cfg.Engine)
	b.Set([]byte("k/a"), []byte("a"))         // then covered by the range
	b.DeleteRange([]byte("k/"), []byte("k0")) // drops k/a, k/c, k/d
	b.Set([]byte("k/b"), []byte("b"))         // after the range: kept
	b.Set([]byte("k/c"), []byte("new c"))     // after the range: kept
	b.Delete([]byte("z"))                     // outside the range
	if _, err := b.Get([]byte("k/d")); err != storage.ErrNotFound {
		t.Fatalf("k/d seen through the round's range deletion: %v", err)
	}
	if err := b.commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k/b": "b", "k/c": "new c"}
	for _, kv := range dump(t, r.cfg.Engine) {
		k, v := string(kv[0]), string(kv[1])
		if want[k] != v {
			t.Fatalf("engine holds %s=%q", k, v)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Fatalf("missing after commit: %v", want)
	}
}

// Only the replica that answers an unconditional put reads whether it
// creates the key; the replicated dedup record does not hold it, so every
// replica's state is the same and a retry answered from the record
// reports the key as not created.
func TestUnconditionalPutCreatedOnlyInTheAnswer(t *testing.T) {
	answering, other := testMachine(t), testMachine(t)
	waiting := func(id []byte) bool { return string(id) == "w1" }
	put := wire.Command{RequestID: []byte("w1"), Op: wire.OpPut, Key: []byte("k"), Value: []byte("v")}
	ra := applyAllWaiting(answering, []wire.Command{put}, func() int { return 1 }, waiting)
	ro := applyAll(other, []wire.Command{put}, func() int { return 1 })
	if !ra[0].Created || ro[0].Created || ra[0].Version != ro[0].Version {
		t.Fatalf("answering replica %+v, other %+v: want created only in the answer", ra[0], ro[0])
	}
	da, do := dump(t, answering.cfg.Engine), dump(t, other.cfg.Engine)
	if len(da) != len(do) {
		t.Fatalf("states differ: %d vs %d keys", len(da), len(do))
	}
	for i := range da {
		if !bytes.Equal(da[i][0], do[i][0]) || !bytes.Equal(da[i][1], do[i][1]) {
			t.Fatalf("states differ at key %x", da[i][0])
		}
	}
	retry := applyAllWaiting(answering, []wire.Command{put}, func() int { return 1 }, waiting)
	if retry[0].Created || retry[0].Version != ra[0].Version {
		t.Fatalf("retry answered %+v, want the first version, not created", retry[0])
	}
	// A conditional create keeps Created in the record: every replica
	// reads the key to evaluate the condition.
	create := wire.Command{RequestID: []byte("c1"), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte("new"), Value: []byte("v")}
	if r := applyAll(other, []wire.Command{create, create}, func() int { return 1 }); !r[0].Created || !r[1].Created {
		t.Fatalf("conditional create and its retry: %+v", r)
	}
}
