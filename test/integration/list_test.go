package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// listObjects is how many objects the listing test writes: 5,000, or
// CAIRN_LIST_OBJECTS (e.g. 100000 for the full-size check).
var listObjects = envInt("CAIRN_LIST_OBJECTS", 5000)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// Objects with index headers written through every node of three real
// processes come back whole and once each: listed by prefix page by page,
// and found by exact and range index queries, through any node.
func TestListingAndIndexQueries(t *testing.T) {
	c := newCluster(t, 3)
	eps := []string{c.url(1), c.url(2), c.url(3)}
	cl, err := client.New(eps, client.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := func(i int) string { return fmt.Sprintf("user/%05d", i) }
	age := func(i int) int { return i%100 - 20 } // -20 .. 79
	email := func(i int) string { return fmt.Sprintf("u%d@d%d.example", i, i%7) }
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < listObjects; i += 16 {
				idx := client.IndexTerms{"email_bin": {email(i)}, "age_int": {strconv.Itoa(age(i))}}
				if _, err := cl.PutIndexed(ctx, []byte(key(i)), []byte("v"+key(i)), client.PutOptions{}, idx); err != nil {
					errs <- fmt.Errorf("put %s: %w", key(i), err)
					return
				}
			}
		}(w)
	}
	// Keys outside the listed prefix, on either side of it.
	for _, k := range []string{"a", "user", "user0", "userz", "zz"} {
		if _, err := cl.Put(ctx, []byte(k), []byte("x"), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// List by prefix through each node, pages of different sizes.
	for i, limit := range []int{1000, 97, 333} {
		node, err := client.New([]string{eps[i]}, client.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		opts := client.ListOptions{Prefix: "user/", Limit: limit, KeysOnly: i == 1}
		var got []string
		for pages := 0; ; pages++ {
			p, err := node.List(ctx, opts)
			if err != nil {
				t.Fatalf("node %d page %d: %v", i+1, pages, err)
			}
			for _, e := range p.Entries {
				if !opts.KeysOnly && string(e.Value) != "v"+string(e.Key) {
					t.Fatalf("key %s listed with value %q", e.Key, e.Value)
				}
				got = append(got, string(e.Key))
			}
			if p.Continuation == "" {
				break
			}
			opts.Continuation = p.Continuation
		}
		checkKeys(t, fmt.Sprintf("listing via node %d, limit %d", i+1, limit), got, func(j int) bool { return true })
	}

	// Exact queries: every object of one email domain is found by its own
	// email; a range of ages, in integer order, negatives first.
	for _, i := range []int{0, 1, 2499, 4999} {
		p, err := cl.IndexQuery(ctx, client.IndexQueryOptions{Index: "email_bin", Term: email(i)})
		if err != nil || len(p.Matches) != 1 || string(p.Matches[0].Key) != key(i) {
			t.Fatalf("email %s: %+v %v", email(i), p, err)
		}
	}
	type match struct {
		age int
		key string
	}
	var matches []match
	opts := client.IndexQueryOptions{Index: "age_int", Start: "-5", End: "10", MaxResults: 250, ReturnTerms: true}
	for {
		p, err := cl.IndexQuery(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Matches {
			a, err := strconv.Atoi(m.Term)
			if err != nil {
				t.Fatalf("term %q", m.Term)
			}
			matches = append(matches, match{a, string(m.Key)})
		}
		if p.Continuation == "" {
			break
		}
		opts.Continuation = p.Continuation
	}
	if !sort.SliceIsSorted(matches, func(a, b int) bool {
		return matches[a].age < matches[b].age || matches[a].age == matches[b].age && matches[a].key < matches[b].key
	}) {
		t.Fatal("age range not in (term, key) order")
	}
	var keys []string
	for _, m := range matches {
		keys = append(keys, m.key)
	}
	sort.Strings(keys)
	checkKeys(t, "age range [-5, 10]", keys, func(j int) bool { return age(j) >= -5 && age(j) <= 10 })

	// YCSB E in `cairn bench` scans with real listings.
	out := filepath.Join(t.TempDir(), "ycsb-e")
	b, err := exec.Command(binary, "bench", "--target", strings.Join(eps, ","), "--out", out, "--workload", "ycsb-e",
		"--records", "300", "--clients", "4", "--total", "300").CombinedOutput()
	if err != nil {
		t.Fatalf("bench ycsb-e: %v\n%s", err, b)
	}
	if res := readBenchResults(t, out); res.Ops != 300 || res.Errors != 0 {
		t.Fatalf("bench ycsb-e: %d ops, %d errors\n%s", res.Ops, res.Errors, b)
	}
	if strings.Contains(string(b), "point reads") {
		t.Fatalf("bench ycsb-e still approximates scans:\n%s", b)
	}

	// HEAD answers the size and terms without the value.
	v, size, idx, err := cl.Head(ctx, []byte(key(42)), false)
	if err != nil || v == 0 || size != int64(len("v"+key(42))) || !slices.Equal(idx["age_int"], []string{strconv.Itoa(age(42))}) {
		t.Fatalf("HEAD %s: v%d size %d terms %v %v", key(42), v, size, idx, err)
	}
}

// checkKeys fails unless got is exactly the keys user/NNNNN of the objects
// j < listObjects that want selects, in order, each once.
func checkKeys(t *testing.T, what string, got []string, want func(j int) bool) {
	t.Helper()
	var exp []string
	for j := 0; j < listObjects; j++ {
		if want(j) {
			exp = append(exp, fmt.Sprintf("user/%05d", j))
		}
	}
	if slices.Equal(got, exp) {
		return
	}
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	missing, dups := 0, 0
	for _, k := range exp {
		if seen[k] == 0 {
			missing++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	t.Fatalf("%s: %d keys, want %d: %d missing, %d duplicated, %d extra or out of order", what, len(got), len(exp), missing, dups, len(got)-len(exp)+missing)
}
