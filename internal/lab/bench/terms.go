package bench

import (
	"fmt"
	"math/rand"
	"strconv"
)

// MaxIndexTerms bounds Params.IndexTerms (--index-terms).
const MaxIndexTerms = 8

// Index terms of the put and entity workloads' writes (--index-terms N),
// for the performance rows "with features on": every write carries N
// secondary-index terms, alternately a byte-string term (bench<i>_bin, one
// of indexCardinality values) and an integer one (bench<i>_int), so each
// write also replaces the index entries of the value it overwrites.
const indexCardinality = 10000

// benchTerms draws n index terms.
func benchTerms(r *rand.Rand, n int) [][2]string {
	if n == 0 {
		return nil
	}
	t := make([][2]string, n)
	for i := range t {
		if i%2 == 0 {
			t[i] = [2]string{"bench" + strconv.Itoa(i) + "_bin", fmt.Sprintf("t%05d", r.Intn(indexCardinality))}
		} else {
			t[i] = [2]string{"bench" + strconv.Itoa(i) + "_int", strconv.Itoa(r.Intn(1_000_000))}
		}
	}
	return t
}

// validIndexTerms checks Params.IndexTerms for the workload.
func validIndexTerms(p Params) error {
	switch {
	case p.IndexTerms < 0 || p.IndexTerms > MaxIndexTerms:
		return fmt.Errorf("bench: --index-terms %d: want 0 to %d", p.IndexTerms, MaxIndexTerms)
	case p.IndexTerms > 0 && p.Workload != "put" && p.Workload != "entity":
		return fmt.Errorf("bench: --index-terms applies to the put and entity workloads, not %q", p.Workload)
	}
	return nil
}
