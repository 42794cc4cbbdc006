package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/wire"
)

func term(t *testing.T, name, text string) wire.IndexTerm {
	t.Helper()
	tm, err := wire.ParseIndexTerm(name, text)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// listAll pages through a listing with small pages, checking each page
// is in order and that no key comes twice.
func listAll(t *testing.T, c *kv.Coordinator, opts kv.ListOptions) []string {
	t.Helper()
	var keys []string
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("listing does not end")
		}
		p, err := c.List(ctx5(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > max(opts.Limit, 1) {
			t.Fatalf("page of %d entries with limit %d", len(p.Entries), opts.Limit)
		}
		for _, e := range p.Entries {
			k := string(e.Key)
			if seen[k] {
				t.Fatalf("key %q listed twice", k)
			}
			if len(keys) > 0 && k <= keys[len(keys)-1] {
				t.Fatalf("key %q listed after %q", k, keys[len(keys)-1])
			}
			if !opts.KeysOnly && string(e.Value) != "v-"+k {
				t.Fatalf("key %q has value %q", k, e.Value)
			}
			seen[k] = true
			keys = append(keys, k)
		}
		if !p.More {
			return keys
		}
		opts.After = p.Last
	}
}

// Listing across shards and nodes with small pages returns every key once,
// in order, through any node, whichever nodes the coordinator asks (five
// nodes, replication 3: no node holds every shard).
func TestListPagesAcrossShards(t *testing.T) {
	c := newCluster(t, 5, 8, replica.Config{})
	rng := rand.New(rand.NewPCG(1, 1))
	var want []string
	for i := 0; i < 400; i++ {
		k := fmt.Sprintf("%c/%04d", 'a'+rng.IntN(4), rng.IntN(10000))
		if slices.Contains(want, k) {
			continue
		}
		want = append(want, k)
		if _, _, err := c.nodes[uint64(i%5+1)].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(want)
	for _, n := range c.nodes {
		for _, limit := range []int{1, 7, 1000} {
			got := listAll(t, n.coord, kv.ListOptions{Limit: limit})
			if !slices.Equal(got, want) {
				t.Fatalf("node %d limit %d: listed %d keys, want %d", n.id, limit, len(got), len(want))
			}
		}
	}
	// A prefix, a range, keys only, serializable (once replicas caught up).
	var wantB []string
	for _, k := range want {
		if k[0] == 'b' {
			wantB = append(wantB, k)
		}
	}
	if got := listAll(t, c.nodes[2].coord, kv.ListOptions{Prefix: []byte("b/"), Limit: 5, KeysOnly: true}); !slices.Equal(got, wantB) {
		t.Fatalf("prefix b/: %d keys, want %d", len(got), len(wantB))
	}
	if got := listAll(t, c.nodes[3].coord, kv.ListOptions{Start: []byte("b"), End: []byte("c"), Limit: 9}); !slices.Equal(got, wantB) {
		t.Fatalf("range [b, c): %d keys, want %d", len(got), len(wantB))
	}
	eventually(t, 5*time.Second, func() error {
		got := listAll(t, c.nodes[4].coord, kv.ListOptions{Limit: 13, Consistency: kv.Serializable})
		if !slices.Equal(got, want) {
			return fmt.Errorf("serializable listing: %d keys, want %d", len(got), len(want))
		}
		return nil
	})
	// Deleted keys leave the listing.
	for _, k := range want[:50] {
		if _, err := c.nodes[1].coord.Delete(ctx5(t), []byte(k), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := listAll(t, c.nodes[5].coord, kv.ListOptions{Limit: 11}); !slices.Equal(got, want[50:]) {
		t.Fatalf("after deletes: %d keys, want %d", len(got), len(want)-50)
	}
	// Bad arguments.
	for _, o := range []kv.ListOptions{{Limit: kv.MaxListLimit + 1}, {Limit: -1}, {Prefix: []byte("b"), After: []byte("c")}} {
		if _, err := c.nodes[1].coord.List(ctx5(t), o); !errors.Is(err, kv.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want invalid argument", o, err)
		}
	}
}

// Index queries return (term, key) pairs in integer order for _int terms,
// negative ones included, page by page; overwrites and deletes move and
// remove entries; GET and HEAD return the terms.
func TestIndexQueryIntOrder(t *testing.T) {
	c := newCluster(t, 3, 6, replica.Config{})
	type tk struct {
		term int64
		key  string
	}
	var want []tk
	for i := 0; i < 120; i++ {
		age := int64(i%17) - 8 // -8 .. 8
		k := fmt.Sprintf("u%03d", i)
		opts := kv.WriteOptions{Index: []wire.IndexTerm{term(t, "age_int", fmt.Sprint(age)), term(t, "email_bin", k+"@x")}}
		if _, _, err := c.nodes[uint64(i%3+1)].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), opts); err != nil {
			t.Fatal(err)
		}
		want = append(want, tk{age, k})
	}
	// Move u000 from -8 to 100 and delete u001.
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte("u000"), []byte("v"), kv.WriteOptions{Index: []wire.IndexTerm{term(t, "age_int", "100")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[1].coord.Delete(ctx5(t), []byte("u001"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(x tk) bool { return x.key == "u000" || x.key == "u001" })
	want = append(want, tk{100, "u000"})
	sort.Slice(want, func(i, j int) bool {
		if want[i].term != want[j].term {
			return want[i].term < want[j].term
		}
		return want[i].key < want[j].key
	})
	query := func(node uint64, start, end string, limit int) []tk {
		var got []tk
		opts := kv.IndexQueryOptions{Name: "age_int", Start: term(t, "age_int", start).Term, End: term(t, "age_int", end).Term, Limit: limit}
		for {
			p, err := c.nodes[node].coord.IndexQuery(ctx5(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Entries {
				v, _ := wire.DecodeIntTerm(e.Term.Term)
				got = append(got, tk{v, string(e.Key)})
			}
			if !p.More {
				return got
			}
			opts.After = p.Last
		}
	}
	if got := query(2, "-9223372036854775808", "9223372036854775807", 7); !slices.Equal(got, want) {
		t.Fatalf("full range:\n got %v\nwant %v", got, want)
	}
	var mid []tk
	for _, x := range want {
		if x.term >= -3 && x.term <= 2 {
			mid = append(mid, x)
		}
	}
	if got := query(3, "-3", "2", 4); !slices.Equal(got, mid) {
		t.Fatalf("range [-3, 2]:\n got %v\nwant %v", got, mid)
	}
	if got := query(1, "100", "100", 10); !slices.Equal(got, []tk{{100, "u000"}}) {
		t.Fatalf("exact 100: %v", got)
	}
	p, err := c.nodes[1].coord.IndexQuery(ctx5(t), kv.IndexQueryOptions{Name: "email_bin", Start: []byte("u005@x"), End: []byte("u005@x")})
	if err != nil || len(p.Entries) != 1 || string(p.Entries[0].Key) != "u005" {
		t.Fatalf("exact email: %+v %v", p, err)
	}
	v, err := c.nodes[2].coord.Get(ctx5(t), []byte("u005"), kv.ReadOptions{})
	if err != nil || len(v.Index) != 2 {
		t.Fatalf("get u005: %+v %v", v, err)
	}
	m, err := c.nodes[3].coord.Head(ctx5(t), []byte("u005"), kv.ReadOptions{})
	if err != nil || m.Size != len("v-u005") || m.Version != v.Version || len(m.Index) != 2 {
		t.Fatalf("head u005: %+v %v", m, err)
	}
	// Bad queries.
	for _, o := range []kv.IndexQueryOptions{
		{Name: "age", Start: []byte("x"), End: []byte("x")},
		{Name: "age_int", Start: []byte("short"), End: []byte("short")},
		{Name: "age_int", Start: wire.EncodeIntTerm(5), End: wire.EncodeIntTerm(4)},
		{Name: "age_int", Start: wire.EncodeIntTerm(1), End: wire.EncodeIntTerm(4), After: wire.EncodeIntTerm(9)},
		{Name: "email_bin", Start: []byte("a"), End: []byte("b"), After: []byte("a\x00\x07")},
	} {
		if _, err := c.nodes[1].coord.IndexQuery(ctx5(t), o); !errors.Is(err, kv.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want invalid argument", o, err)
		}
	}
}

// A listing planned on a node that is gone moves that node's shards to
// other replicas: the page is still whole. Each other node is stopped in
// turn, so one of them is one the coordinator plans on.
func TestListWithANodeDown(t *testing.T) {
	c := newCluster(t, 4, 6, replica.Config{})
	var want []string
	for i := 0; i < 120; i++ {
		k := fmt.Sprintf("k%03d", i)
		want = append(want, k)
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, victim := range []uint64{2, 3, 4} {
		c.stop(victim)
		for _, cons := range []kv.Consistency{kv.Linearizable, kv.Serializable} {
			eventually(t, 10*time.Second, func() error {
				var got []string
				opts := kv.ListOptions{Limit: 25, Consistency: cons}
				for {
					p, err := c.nodes[1].coord.List(ctx5(t), opts)
					if err != nil {
						return err
					}
					for _, e := range p.Entries {
						got = append(got, string(e.Key))
					}
					if !p.More {
						break
					}
					opts.After = p.Last
				}
				if !slices.Equal(got, want) {
					return fmt.Errorf("node %d down, consistency %d: %d keys, want %d", victim, cons, len(got), len(want))
				}
				return nil
			})
		}
		c.start(victim, false)
	}
}

// A replica brought up to date by a snapshot has the derived indexes of
// the snapshot's data, not of what it held before: its own serializable
// listing and index query (served by its local replica) are exact.
func TestIndexesAfterSnapshot(t *testing.T) {
	// TruncateBytes: the leader keeps the stopped follower's log only up
	// to 64 times that (1 KiB): node 3 needs a snapshot.
	c := newCluster(t, 3, 1, replica.Config{TruncateThreshold: 20, TruncateKeep: 2, TruncateBytes: 16})
	put := func(k, tag string) {
		t.Helper()
		opts := kv.WriteOptions{Index: []wire.IndexTerm{term(t, "tag_bin", tag)}}
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(k), []byte("v-"+k), opts); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		put(fmt.Sprintf("k%03d", i), "old")
	}
	eventually(t, 5*time.Second, func() error {
		if a := c.nodes[3].st.Replica(1).Applied(); a < c.nodes[1].st.Replica(1).Applied() {
			return fmt.Errorf("node 3 applied %d", a)
		}
		return nil
	})
	c.stop(3)
	// While node 3 is down: half the objects are deleted, the rest move
	// to another tag, and new ones come.
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("k%03d", i)
		if i%2 == 0 {
			if _, err := c.nodes[1].coord.Delete(ctx5(t), []byte(k), kv.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else {
			put(k, "new")
		}
	}
	for i := 30; i < 100; i++ {
		put(fmt.Sprintf("k%03d", i), "new")
	}
	lead := c.nodes[leaderOf(c, 1)]
	c.start(3, false)
	if first, _ := lead.st.Replica(1).LogBounds(); first <= c.nodes[3].st.Replica(1).Applied()+1 {
		t.Fatalf("the leader's log starts at %d: node 3 could catch up without a snapshot", first)
	}
	var want []string
	for i := 1; i < 100; i++ {
		if i >= 30 || i%2 == 1 {
			want = append(want, fmt.Sprintf("k%03d", i))
		}
	}
	eventually(t, 10*time.Second, func() error {
		got := listAll(t, c.nodes[3].coord, kv.ListOptions{Limit: 1000, Consistency: kv.Serializable, KeysOnly: true})
		if !slices.Equal(got, want) {
			return fmt.Errorf("node 3 lists %d keys, want %d", len(got), len(want))
		}
		for tag, n := range map[string]int{"old": 0, "new": len(want)} {
			p, err := c.nodes[3].coord.IndexQuery(ctx5(t), kv.IndexQueryOptions{Name: "tag_bin", Start: []byte(tag), End: []byte(tag),
				Limit: 1000, Consistency: kv.Serializable})
			if err != nil || len(p.Entries) != n {
				return fmt.Errorf("node 3: tag %s has %d entries (%v), want %d", tag, len(p.Entries), err, n)
			}
		}
		return nil
	})
}
