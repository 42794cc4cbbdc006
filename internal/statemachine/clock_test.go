package statemachine

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

const year = 365 * 24 * time.Hour

// The shard clock counts the time between two stamps of one term's
// leader, at most MaxClockStep per stamp; a new term's first stamp only
// sets its base, whatever the new leader's clock reads.
func TestShardClockCountsOnlyALeadersElapsedTime(t *testing.T) {
	const step = 100
	var c clockState
	for i, s := range []struct {
		term, reading, want uint64
	}{
		{1, 1000, 0},                 // a term's first stamp: its base
		{1, 1040, 40},                // 40 passed on the leader
		{1, 1030, 40},                // an older reading counts nothing
		{1, 1050, 50},                // counted from the highest reading
		{2, uint64(year), 50},        // a leader whose clock reads a year more
		{2, uint64(year) + 30, 80},   // counts only its own 30
		{2, 2 * uint64(year), 180},   // a jump of a year: one step
		{2, 2*uint64(year) + 5, 185}, // then on from the jumped reading
		{3, 7, 185},                  // a leader whose clock reads less
		{3, 17, 195},
	} {
		c.advance(s.term, s.reading, step)
		if c.now != s.want {
			t.Fatalf("stamp %d (term %d, reading %d): clock %d, want %d", i, s.term, s.reading, c.now, s.want)
		}
	}
}

// skewed applies one entry at a time as a cluster would log it: each
// stamped by the leader of its term with that leader's clock reading, or
// unstamped (forwarded by a follower).
type skewed struct {
	t     *testing.T
	m     *Machine
	index uint64
}

func (s *skewed) apply(term uint64, reading time.Duration, stamped bool, cmds ...wire.Command) []Result {
	s.index++
	enc := make([][]byte, len(cmds))
	for i := range cmds {
		enc[i] = cmds[i].Marshal()
	}
	var data []byte
	switch {
	case stamped:
		data = wire.MarshalStamped(uint64(reading), enc)
	case len(enc) == 1:
		data = enc[0]
	default:
		data = wire.MarshalBatch(enc)
	}
	rd := s.m.Begin(nil)
	s.m.ApplyEntry(rd, s.index, term, data)
	if err := s.m.Commit(rd); err != nil {
		s.t.Fatal(err)
	}
	var out []Result
	for _, a := range rd.Applied() {
		out = append(out, a.Result)
	}
	return out
}

func liveRecords(m *Machine) int {
	n := 0
	for _, b := range m.dedup.order {
		n += m.dedup.buckets[b].filter.count()
	}
	return n
}

// The defect: each proposer's wall clock aged the records, so a proposer
// 2 minutes ahead pruned every other's (a compare-and-set retried a second
// later answered 412 after it had succeeded; an unconditional put applied
// twice), and one a year ahead stopped pruning for good. Now leaders whose
// clocks read 2 minutes and a year ahead of the first, and a jump of a
// year within a term, leave a retry one second later its record, and the
// table stays bounded after the jump.
func TestDedupRecordsOutliveSkewedLeaders(t *testing.T) {
	m := testMachine(t)
	m.cfg.DedupTTL = DefaultDedupTTL
	s := &skewed{t: t, m: m}
	base := time.Hour // leader A's clock reading when real time is 0
	cas := wire.Command{RequestID: []byte("cas"), Op: wire.OpPut, Cond: wire.CondIfAbsent, Key: []byte("k"), Value: []byte("v")}
	put := wire.Command{RequestID: []byte("put"), Op: wire.OpPut, Key: []byte("p"), Value: []byte("v")}
	other := func(i int) wire.Command {
		return wire.Command{RequestID: []byte(fmt.Sprint("w", i)), Op: wire.OpPut, Key: []byte(fmt.Sprint("x", i%10)), Value: []byte("v")}
	}
	ms := time.Millisecond
	s.apply(1, base, true)
	first := s.apply(1, base+10*ms, true, cas)[0]
	firstPut := s.apply(1, base+20*ms, false, put)[0] // forwarded
	// Leader B's clock reads 2 minutes more than A's; C's a year more, and
	// then jumps a year.
	s.apply(2, base+2*time.Minute+500*ms, true, other(0))
	s.apply(2, base+2*time.Minute+600*ms, true, other(1))
	s.apply(3, base+year+700*ms, true, other(2))
	s.apply(3, base+2*year+800*ms, true, other(3))
	// One second after the first attempts, their retries.
	retry := s.apply(3, base+2*year+time.Second, true, cas, put)
	if retry[0].Result != first.Result {
		t.Fatalf("compare-and-set retried after 1 s: %+v, first answer %+v", retry[0], first)
	}
	if retry[1].Result != firstPut.Result {
		t.Fatalf("put retried after 1 s: %+v, first answer %+v (applied twice)", retry[1], firstPut)
	}
	if v, err := m.Get([]byte("p")); err != nil || v.Version != firstPut.Version {
		t.Fatalf("p at version %d (%v), want %d", v.Version, err, firstPut.Version)
	}
	if c := m.Clock(); c > time.Second+MaxClockStep(DefaultDedupTTL) {
		t.Fatalf("shard clock %v after 1 s of real time and a jump", c)
	}
	// After the jump the clock goes on, and the table holds the last
	// 1.25 TTL or so of writes: one a second for 20 minutes.
	now := base + 2*year + time.Second
	for i := 0; i < 1200; i++ {
		now += time.Second
		s.apply(3, now, true, other(4+i))
	}
	if n := liveRecords(m); n < 100 || n > 180 {
		t.Fatalf("%d live records of 1200 written one a second, want the last 2.5 minutes' or so", n)
	}
	if res := s.apply(3, now, true, cas)[0]; res.Status != wire.StatusPreconditionFailed {
		t.Fatalf("cas retried after 20 minutes: %+v, want its record expired (412)", res)
	}
}

// A record lasts MinRetention of real time after its write whatever the
// leaders' clocks read: random leader changes (each leader's clock an
// arbitrary offset from the others'), idle gaps of up to ten minutes,
// writes forwarded by followers (unstamped). Every retry made within
// MinRetention of its write gets the first answer.
func TestRetriesWithinMinRetentionFindTheirRecord(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	m := testMachine(t)
	m.cfg.DedupTTL = DefaultDedupTTL
	s := &skewed{t: t, m: m}
	keep := MinRetention(DefaultDedupTTL)
	type write struct {
		cmd wire.Command
		at  time.Duration
		res wire.Result
	}
	var recent []write
	var now time.Duration
	term, offset := uint64(1), time.Duration(rng.Int63n(int64(year)))
	retries := 0
	for i := 0; i < 4000; i++ {
		now += time.Duration(rng.Int63n(int64(2 * time.Second)))
		if rng.Intn(60) == 0 {
			now += time.Duration(rng.Int63n(int64(10 * time.Minute)))
		}
		if rng.Intn(40) == 0 {
			term++
			offset = time.Duration(rng.Int63n(int64(year)))
		}
		for len(recent) > 0 && now-recent[0].at >= keep {
			recent = recent[1:]
		}
		stamped := rng.Intn(3) != 0
		if len(recent) > 0 && rng.Intn(3) == 0 {
			w := recent[rng.Intn(len(recent))]
			if got := s.apply(term, now+offset, stamped, w.cmd)[0]; got.Result != w.res {
				t.Fatalf("seed %d: retry %v after %v answered %+v, first answer %+v", seed, string(w.cmd.RequestID), now-w.at, got.Result, w.res)
			}
			retries++
			continue
		}
		c := wire.Command{RequestID: []byte(fmt.Sprint("id", i)), Op: wire.OpPut, Key: []byte(fmt.Sprint("k", rng.Intn(30))), Value: []byte("v")}
		switch rng.Intn(3) {
		case 0:
			c.Cond = wire.CondIfAbsent
		case 1:
			c.Cond, c.Version = wire.CondIfMatch, s.index-uint64(rng.Intn(5))
		}
		res := s.apply(term, now+offset, stamped, c)[0]
		recent = append(recent, write{c, now, res.Result})
	}
	if retries < 500 {
		t.Fatalf("only %d retries", retries)
	}
}

// A data dir of an earlier Cairn holds dedup groups bucketed by wall
// clocks and no shard clock: they are dropped when the machine opens.
func TestOpenDropsGroupsWithoutAShardClock(t *testing.T) {
	m := testMachine(t)
	b := m.cfg.Engine.NewBatch()
	b.Set(storage.DedupKey(1, 56_000_000, 9), appendDedupRecord(nil, []byte("old"), []byte("result")))
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	m2, err := Open(Config{ShardID: 1, Engine: m.cfg.Engine, DedupTTL: time.Second, VersionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	if m2.HasRecords() {
		t.Fatal("groups without a shard clock were kept")
	}
	// Groups written with a shard clock stay.
	applyAll(m2, []wire.Command{{RequestID: []byte("new"), Op: wire.OpPut, Key: []byte("k")}}, func() int { return 1 })
	m3, err := Open(Config{ShardID: 1, Engine: m.cfg.Engine, DedupTTL: time.Second, VersionCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !m3.HasRecords() {
		t.Fatal("a reopened machine lost its records")
	}
}
