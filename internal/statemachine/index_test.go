package statemachine

import (
	"bytes"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

func bin(name, v string) wire.IndexTerm { return wire.IndexTerm{Name: name, Term: []byte(v)} }
func num(name string, v int64) wire.IndexTerm {
	return wire.IndexTerm{Name: name, Term: wire.EncodeIntTerm(v)}
}

func put(id, key, val string, terms ...wire.IndexTerm) wire.Command {
	t, err := wire.NormalizeIndex(terms)
	if err != nil {
		panic(err)
	}
	return wire.Command{RequestID: []byte(id), Op: wire.OpPut, Key: []byte(key), Value: []byte(val), Index: t}
}

// derived lists the engine's derived entries as readable strings:
// "k:<key>" for key order, "<index>=<term>:<key>" for an index entry, each
// checked to carry the key's token.
func derived(t *testing.T, e *storage.Engine) []string {
	t.Helper()
	it, err := e.NewIter([]byte{0x04}, []byte{0x06})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		tok, err := storage.DerivedToken(v)
		if err != nil {
			t.Fatal(err)
		}
		var s string
		var key []byte
		if k[0] == 0x04 {
			key = k[1:]
			s = "k:" + string(key)
		} else {
			i := bytes.IndexByte(k, 0)
			name := string(k[1:i])
			term, kk, err := storage.SplitIndexSortKey(name, k[i+1:])
			if err != nil {
				t.Fatal(err)
			}
			key = kk
			s = name + "=" + wire.IndexTerm{Name: name, Term: term}.Text() + ":" + string(key)
		}
		if tok != shard.Token(key) {
			t.Fatalf("entry %s holds token %x, want %x", s, tok, shard.Token(key))
		}
		out = append(out, s)
	}
	return out
}

func wantDerived(t *testing.T, e *storage.Engine, want ...string) {
	t.Helper()
	want = slices.Clone(want)
	sort.Strings(want)
	got := derived(t, e)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("derived entries\n got %q\nwant %q", got, want)
	}
}

func TestIndexMaintenance(t *testing.T) {
	m := testMachine(t)
	e := m.cfg.Engine
	applyAll(m, []wire.Command{
		put("1", "a", "va", bin("email_bin", "a@x"), num("age_int", 30)),
		put("2", "b", "vb"),
	}, func() int { return 1 })
	wantDerived(t, e, "k:a", "k:b", "email_bin=a@x:a", "age_int=30:a")

	// An overwrite replaces the terms: kept ones stay, others go.
	applyRound(m, []wire.Command{put("3", "a", "va2", bin("email_bin", "a@x"), num("age_int", -4), bin("tag_bin", "t"))}, nil, 0, 1, nil)
	wantDerived(t, e, "k:a", "k:b", "email_bin=a@x:a", "age_int=-4:a", "tag_bin=t:a")
	v, err := m.Get([]byte("a"))
	if err != nil || string(v.Data) != "va2" || len(v.Index) != 3 {
		t.Fatalf("Get: %+v %v", v, err)
	}

	// A failed condition changes nothing, index entries included.
	cas := put("4", "a", "nope", bin("email_bin", "other"))
	cas.Cond, cas.Version = wire.CondIfMatch, 999
	absent := put("5", "b", "nope", bin("email_bin", "other"))
	absent.Cond = wire.CondIfAbsent
	res := applyAll(m, []wire.Command{cas, absent}, func() int { return 2 })
	for _, r := range res {
		if r.Status != wire.StatusPreconditionFailed {
			t.Fatalf("result %+v, want precondition failed", r)
		}
	}
	wantDerived(t, e, "k:a", "k:b", "email_bin=a@x:a", "age_int=-4:a", "tag_bin=t:a")

	// An overwrite without terms drops them; a delete drops everything.
	applyAll(m, []wire.Command{
		put("6", "a", "plain"),
		{RequestID: []byte("7"), Op: wire.OpDelete, Key: []byte("b")},
	}, func() int { return 2 })
	wantDerived(t, e, "k:a")
	applyAll(m, []wire.Command{{RequestID: []byte("8"), Op: wire.OpDelete, Key: []byte("a")}}, func() int { return 1 })
	wantDerived(t, e)
}

// On a replica that does not answer the writes, unconditional puts skip
// reading the key until the shard has indexed objects; after that they
// must read, or an overwrite would leave the old terms behind.
func TestIndexBlindPutsAfterIndexing(t *testing.T) {
	m := withVersionCache(testMachine(t), 16)
	applyAll(m, []wire.Command{put("1", "a", "v1"), put("2", "a", "v2")}, func() int { return 1 })
	if m.Indexed() {
		t.Fatal("shard marked indexed without index terms")
	}
	applyAll(m, []wire.Command{put("3", "a", "v3", bin("x_bin", "1")), put("4", "a", "v4", bin("x_bin", "2"))}, func() int { return 1 })
	wantDerived(t, m.cfg.Engine, "k:a", "x_bin=2:a")
	if !m.Indexed() {
		t.Fatal("shard not marked indexed")
	}
	// The flag survives a reload (it is replicated state).
	if err := m.Reset(); err != nil || !m.Indexed() {
		t.Fatalf("after Reset: indexed %v, err %v", m.Indexed(), err)
	}
}

// randomIndexed returns n random writes on a few keys with random terms.
func randomIndexed(rng *rand.Rand, n int) []wire.Command {
	var cmds []wire.Command
	for i := 0; i < n; i++ {
		key := fmt.Sprint("k", rng.Intn(30))
		var terms []wire.IndexTerm
		for j := rng.Intn(4); j > 0; j-- {
			if rng.Intn(2) == 0 {
				terms = append(terms, bin("e_bin", fmt.Sprint("t\x00", rng.Intn(5))))
			} else {
				terms = append(terms, num("n_int", int64(rng.Intn(7)-3)))
			}
		}
		c := put(fmt.Sprint("id", i), key, fmt.Sprint(i), terms...)
		switch rng.Intn(5) {
		case 0:
			c.Op, c.Index = wire.OpDelete, nil
		case 1:
			c.Cond = wire.CondIfAbsent
		case 2:
			c.Cond, c.Version = wire.CondIfMatch, uint64(rng.Intn(i+1))
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// Rebuilding the derived entries from the data gives exactly what
// incremental maintenance wrote, and does not touch other ranges.
func TestRebuildDerivedEqualsIncremental(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	m := testMachine(t)
	applyAll(m, randomIndexed(rng, 2000), func() int { return 1 + rng.Intn(20) })
	e := m.cfg.Engine
	want := derived(t, e)
	if len(want) < 30 {
		t.Fatalf("only %d derived entries: the test writes too little", len(want))
	}
	if err := e.DropDerived(0, 0); err != nil {
		t.Fatal(err)
	}
	wantDerived(t, e)
	if err := e.RebuildDerived(0, 0); err != nil {
		t.Fatal(err)
	}
	wantDerived(t, e, want...)
	// Dropping half of the token space keeps the other half's entries.
	if err := e.DropDerived(0, 1<<63); err != nil {
		t.Fatal(err)
	}
	var upper []string
	for _, s := range want {
		k := s[bytes.LastIndexByte([]byte(s), ':')+1:]
		if shard.Token([]byte(k)) >= 1<<63 {
			upper = append(upper, s)
		}
	}
	wantDerived(t, e, upper...)
	if err := e.RebuildDerived(0, 1<<63); err != nil {
		t.Fatal(err)
	}
	wantDerived(t, e, want...)
}

// A crash at any point — unsynced apply rounds partly lost — leaves index
// entries and objects in agreement after the restart: each round's
// entries commit in the same Pebble batch as its objects.
func TestIndexCrashConsistency(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	fs := storage.NewCrashableFS()
	open := func(f *storage.CrashableFS) (*Machine, *storage.Engine) {
		eng, err := storage.Open("db", storage.Options{CacheSize: 1 << 20, FS: f.FS()})
		if err != nil {
			t.Fatal(err)
		}
		m, err := Open(Config{ShardID: 1, Engine: eng, DedupTTL: time.Second, VersionCache: -1})
		if err != nil {
			t.Fatal(err)
		}
		return m, eng
	}
	m, eng := open(fs)
	cmds := randomIndexed(rng, 1500)
	seen := 0
	for i := 0; i < len(cmds); {
		n := min(1+rng.Intn(10), len(cmds)-i)
		applyRound(m, cmds, nil, i, i+n, nil)
		i += n
		if rng.Intn(50) == 0 {
			// Some rounds are synced, as the replica's are with its log.
			b := eng.NewBatch()
			b.Set(storage.MetaKey("sync"), nil)
			if err := b.Commit(true); err != nil {
				t.Fatal(err)
			}
		}
		if i%300 < 10 {
			crashed := fs.CrashClone(40, randv2.New(randv2.NewPCG(uint64(i), 1)))
			_, ce := open(crashed)
			seen += checkAgreement(t, ce)
			ce.Close()
		}
	}
	eng.Close()
	if seen == 0 {
		t.Fatal("no crashed engine held any derived entry: the test checks nothing")
	}
}

// checkAgreement checks that the derived entries are exactly those the
// engine's data implies.
func checkAgreement(t *testing.T, e *storage.Engine) int {
	t.Helper()
	got := derived(t, e)
	if err := e.RebuildDerived(0, 0); err != nil {
		t.Fatal(err)
	}
	if want := derived(t, e); !slices.Equal(got, want) {
		t.Fatalf("after a crash the derived entries disagree with the data\n got %q\nwant %q", got, want)
	}
	return len(got)
}
