package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"
)

// The volume test's workload ("nhs"), after the general workload of the
// Riak release volume tests (modelled on the NHS Spine): medium objects
// of 4–16 KiB, each with two or three secondary-index terms, under a mix
// of reads, HEAD-then-GETs, updates, new objects and a small share of 2i
// range queries. NHSMix holds the default proportions (--mix overrides
// them); docs/benchmarks/volume/README.md gives the reasons.

// NHSMix is the nhs workload's default operation mix, per 1000.
var NHSMix = map[string]int{"get": 500, "head_get": 195, "update": 200, "insert": 100, "index_query": 5}

// Index names of the nhs workload's objects: every object has a postcode
// and a date of birth (as yyyymmdd), half of them a GP practice too.
const (
	nhsPostcode = "postcode_bin"
	nhsDOB      = "dob_int"
	nhsGP       = "gp_bin"
	// nhsDays is the span of the dates of birth (1930-01-01 on, 90 years).
	nhsDays = 90 * 365
	// nhsQueryDays is the width of a 2i range query's date range: with
	// 100 000 objects about 90 match, more than the page holds.
	nhsQueryDays = 30
	// nhsPage is a 2i range query's max_results.
	nhsPage = 100
)

var nhsEpoch = time.Date(1930, 1, 1, 0, 0, 0, 0, time.UTC)

type nhsWL struct {
	p     Params
	mix   *mix
	pool  []byte
	count atomic.Uint64 // objects written so far (preload and inserts)
}

func newNHS(p Params) (Workload, error) {
	weights := p.Mix
	if len(weights) == 0 {
		weights = NHSMix
	}
	m, err := newMix(weights, []string{"get", "head_get", "update", "insert", "index_query"})
	if err != nil {
		return nil, err
	}
	w := &nhsWL{p: p, mix: m, pool: randValue(16<<10+1024, 11)}
	w.count.Store(p.Keys)
	return w, nil
}

func (w *nhsWL) Name() string { return "nhs" }

func nhsKey(i uint64) []byte { return append([]byte("nhs/"), fixedKey(i, 10)...) }

// value is a random slice of 4 to 16 KiB of the pool.
func (w *nhsWL) value(r *rand.Rand) []byte {
	n := 4<<10 + r.Intn(12<<10+1)
	off := r.Intn(len(w.pool) - n)
	return w.pool[off : off+n]
}

func nhsDate(day int) string {
	return nhsEpoch.AddDate(0, 0, day).Format("20060102")
}

// terms draws an object's index terms: two, or three for half of them.
func nhsTerms(r *rand.Rand) [][2]string {
	t := [][2]string{
		{nhsPostcode, fmt.Sprintf("PC%04d", r.Intn(5000))},
		{nhsDOB, nhsDate(r.Intn(nhsDays))},
	}
	if r.Intn(2) == 0 {
		t = append(t, [2]string{nhsGP, fmt.Sprintf("GP%03d", r.Intn(800))})
	}
	return t
}

func (w *nhsWL) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return w.p.Keys, func(i uint64) ([]byte, []byte) {
		return nhsKey(i), w.value(rand.New(rand.NewSource(int64(i))))
	}
}

// PreloadIndex is the index terms of preloaded object i.
func (w *nhsWL) PreloadIndex(i uint64) [][2]string {
	return nhsTerms(rand.New(rand.NewSource(int64(i) + 1<<40)))
}

func (w *nhsWL) Approximations() []string {
	return []string{
		"head_get is a HEAD then a GET of the same key from the client (Riak 2.9 does the HEAD inside its GET), timed as one operation",
		fmt.Sprintf("index_query is a range over %d days of %s with max_results=%d: the first page only", nhsQueryDays, nhsDOB, nhsPage),
		"keys are chosen uniformly among the objects written so far",
	}
}

func (w *nhsWL) Next(r *rand.Rand) Op {
	n := w.count.Load()
	existing := func() []byte { return nhsKey(uint64(r.Int63n(int64(max(n, 1))))) }
	switch w.mix.pick(r) {
	case "get":
		return Op{Name: "get", Kind: KindGet, Key: existing()}
	case "head_get":
		return Op{Name: "head_get", Kind: KindHeadGet, Key: existing()}
	case "update":
		return Op{Name: "update", Kind: KindPutIndexed, Key: existing(), Value: w.value(r), Index: nhsTerms(r)}
	case "insert":
		return Op{Name: "insert", Kind: KindPutIndexed, Key: nhsKey(w.count.Add(1) - 1), Value: w.value(r), Index: nhsTerms(r)}
	default:
		day := r.Intn(nhsDays - nhsQueryDays)
		return Op{Name: "index_query", Kind: KindIndexRange, Key: []byte(nhsDOB),
			Start: nhsDate(day), End: nhsDate(day + nhsQueryDays), Limit: nhsPage}
	}
}

// indexPreloader is a workload whose preloaded objects carry index terms.
type indexPreloader interface {
	PreloadIndex(i uint64) [][2]string
}

// IndexDriver is what the nhs workload (and --index-terms) needs of a
// driver beyond Driver: writes with index terms, HEAD and 2i range
// queries. The Cairn HTTP driver has it.
type IndexDriver interface {
	// PutIndexed writes key=val with index terms (name, term pairs).
	PutIndexed(ctx context.Context, conn int, key, val []byte, index [][2]string) error
	// EntityPutIndexed is EntityPut (v0) with index terms.
	EntityPutIndexed(ctx context.Context, conn int, id, val []byte, index [][2]string) error
	// Head reads key's metadata, not its value.
	Head(ctx context.Context, conn int, key []byte) error
	// IndexRange reads the first page (up to limit) of a range query on
	// index from start to end, inclusive.
	IndexRange(ctx context.Context, conn int, index, start, end string, limit int) error
}

var errIndexUnsupported = errors.New("bench: this workload needs a Cairn (http://) target: index terms, HEAD and index queries")

// indexDriver is d's IndexDriver, or errIndexUnsupported.
func indexDriver(d Driver) (IndexDriver, error) {
	if id, ok := d.(IndexDriver); ok {
		return id, nil
	}
	return nil, errIndexUnsupported
}

// execIndexed runs the nhs workload's own kinds.
func execIndexed(ctx context.Context, d Driver, conn int, op Op) error {
	id, err := indexDriver(d)
	if err != nil {
		return err
	}
	switch op.Kind {
	case KindPutIndexed:
		return id.PutIndexed(ctx, conn, op.Key, op.Value, op.Index)
	case KindHeadGet:
		if err := id.Head(ctx, conn, op.Key); err != nil {
			return err
		}
		return d.Get(ctx, conn, op.Key)
	case KindIndexRange:
		return id.IndexRange(ctx, conn, string(op.Key), op.Start, op.End, op.Limit)
	}
	return fmt.Errorf("bench: unknown op kind %d", op.Kind)
}

// indexHeaders turns index terms into X-Cairn-Index-<name> headers (one
// per name, terms comma-separated).
func indexHeaders(index [][2]string) [][2]string {
	var h [][2]string
	at := map[string]int{}
	for _, t := range index {
		name := "X-Cairn-Index-" + t[0]
		if i, ok := at[name]; ok {
			h[i][1] += ", " + t[1]
			continue
		}
		at[name] = len(h)
		h = append(h, [2]string{name, t[1]})
	}
	return h
}
