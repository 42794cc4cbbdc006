package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
)

// The indexed workload (WorkloadConfig.IndexKeys): one client per node
// writes the keys idx/NNNN it owns (key i belongs to client i mod the
// clients, so a key's writes never overlap). Its writes carry a term in
// the index IndexName — the key's group g(i mod IndexGroups) — or move
// the key to the next group, or strip the term, or delete the key:
//
//	60 % PUT with the key's group, 10 % PUT with the next group,
//	20 % PUT without a term, 10 % DELETE.
//
// After healing, a linearizable index query per group, paged, must return
// exactly the keys whose last acknowledged write left them in it
// (checker.IndexMismatch); keys a write of unknown outcome may have
// moved are allowed either way.

// IndexName is the index the indexed workload's writes carry.
const IndexName = "group_bin"

// IndexGroups is how many terms the indexed workload uses.
const IndexGroups = 4

// indexPage is the page size of the check's queries: small, so a check
// pages through continuations.
const indexPage = 10

// indexKey is the i-th indexed key.
func indexKey(i int) string { return fmt.Sprintf("idx/%04d", i) }

func indexGroup(i int) string { return fmt.Sprint("g", i%IndexGroups) }

// runIndexed drives indexed client id of n over keys keys.
func runIndexed(ctx context.Context, rec *recorder, cl *client.Client, id, n, keys int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	var own []int
	for i := id; i < keys; i += n {
		own = append(own, i)
	}
	if len(own) == 0 {
		return
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		i := own[rng.Intn(len(own))]
		w := checker.IndexWrite{Key: indexKey(i)}
		value := []byte(fmt.Sprintf("x%d-%d", id, seq))
		call := time.Now()
		w.Call = rec.since(call)
		var err error
		name := "index-put"
		switch x := rng.Intn(10); {
		case x < 6:
			w.Term = indexGroup(i)
		case x < 7:
			w.Term = indexGroup(i + 1)
		case x < 9:
		default:
			w.Delete, name = true, "index-delete"
		}
		switch {
		case w.Delete:
			err = cl.Delete(context.Background(), []byte(w.Key), 0)
			if errors.Is(err, client.ErrNotFound) {
				err = nil // absent before and after
			}
		case w.Term != "":
			_, err = cl.PutIndexed(context.Background(), []byte(w.Key), value, client.PutOptions{}, client.IndexTerms{IndexName: {w.Term}})
		default:
			_, err = cl.Put(context.Background(), []byte(w.Key), value, client.PutOptions{})
		}
		w.Outcome = outcomeOf(err)
		rec.record(name, call, time.Now(), err)
		rec.mu.Lock()
		rec.indexWrites = append(rec.indexWrites, w)
		rec.mu.Unlock()
	}
}

// IndexCheck is the index check of a run with an indexed workload.
type IndexCheck struct {
	Index string `json:"index"`
	// Writes are the indexed writes recorded, Required the keys the
	// queries had to return (all terms), Returned what they returned.
	Writes   int `json:"writes"`
	Required int `json:"required"`
	Returned int `json:"returned"`
	// Pages is how many pages the queries took (continuations followed).
	Pages int `json:"pages"`
	// Missing: "term key" of required keys not returned; Unexpected:
	// forbidden keys returned, and keys returned twice.
	Missing    []string `json:"missing,omitempty"`
	Unexpected []string `json:"unexpected,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Failed reports whether the check found a difference or could not run.
func (c *IndexCheck) Failed() bool {
	return c.Error != "" || len(c.Missing) > 0 || len(c.Unexpected) > 0
}

// checkIndex queries every group after healing (linearizable, paged) and
// compares the answers with the recorded writes.
func checkIndex(writes []checker.IndexWrite, cl *client.Client) *IndexCheck {
	c := &IndexCheck{Index: IndexName, Writes: len(writes)}
	got := map[string][]string{}
	terms := map[string]bool{}
	for _, w := range writes {
		if w.Term != "" {
			terms[w.Term] = true
		}
	}
	names := make([]string, 0, len(terms))
	for t := range terms {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		var keys []string
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			var pages int
			if keys, pages, err = queryAll(cl, t); err == nil {
				c.Pages += pages
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			c.Error = fmt.Sprintf("querying %s/%s: %v", IndexName, t, err)
			return c
		}
		got[t] = keys
		c.Returned += len(keys)
	}
	c.Missing, c.Unexpected, c.Required = checker.IndexMismatch(writes, got)
	return c
}

// queryAll pages through the exact query for term.
func queryAll(cl *client.Client, term string) (keys []string, pages int, err error) {
	cont := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p, err := cl.IndexQuery(ctx, client.IndexQueryOptions{Index: IndexName, Term: term, MaxResults: indexPage, Continuation: cont})
		cancel()
		if err != nil {
			return nil, pages, err
		}
		pages++
		for _, m := range p.Matches {
			keys = append(keys, string(m.Key))
		}
		if p.Continuation == "" {
			return keys, pages, nil
		}
		cont = p.Continuation
	}
}
