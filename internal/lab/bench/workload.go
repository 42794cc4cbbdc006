package bench

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Kind is what an operation does against a driver.
type Kind int

// Operation kinds.
const (
	KindPut        Kind = iota // write key=value (v1 / etcd Put)
	KindGet                    // read key (v1 / etcd Get)
	KindScan                   // read Limit records in key order from Key (YCSB E)
	KindRMW                    // read then write (YCSB F)
	KindEntityPut              // v0 PUT /v0/entity
	KindEntityGet              // v0 GET /v0/entity
	KindPutIndexed             // write key=value with Index terms (nhs)
	KindHeadGet                // HEAD key, then GET it (nhs)
	KindIndexRange             // 2i range query on index Key from Start to End, Limit results (nhs)
)

// Op is one operation of a workload.
type Op struct {
	Name  string // reported name: put, get, read, update, insert, scan, rmw
	Kind  Kind
	Key   []byte
	Value []byte
	Limit int // KindScan: the records to read; KindIndexRange: max_results
	// Index: the write's index terms as (index name, term) pairs
	// (KindPutIndexed; KindPut and KindEntityPut with --index-terms).
	Index [][2]string
	// Start and End: KindIndexRange's inclusive term range.
	Start, End string
}

// Params configure workloads.
type Params struct {
	Workload     string         `json:"workload"`
	KeySize      int            `json:"key_size"`
	ValSize      int            `json:"val_size"`
	Keys         uint64         `json:"keys"`
	Sequential   bool           `json:"sequential_keys"`
	Consistency  string         `json:"consistency"`
	Mix          map[string]int `json:"mix,omitempty"`
	Replicas     string         `json:"replicas,omitempty"`
	Records      uint64         `json:"records"`
	FieldCount   int            `json:"field_count"`
	FieldLength  int            `json:"field_length"`
	Distribution string         `json:"distribution,omitempty"`
	// IndexTerms: the put and entity workloads' writes carry this many
	// secondary-index terms (terms.go). Default 0: none.
	IndexTerms int `json:"index_terms,omitempty"`
}

// Workload generates operations. Next is called concurrently, each caller
// with its own rand.
type Workload interface {
	Name() string
	// Preload returns how many records to load before the run and the
	// record generator (0, nil when nothing is preloaded).
	Preload() (uint64, func(i uint64) (key, value []byte))
	Next(r *rand.Rand) Op
	// Approximations lists what this workload approximates, for reports.
	Approximations() []string
}

// Workloads lists the workload names.
var Workloads = []string{"put", "range", "entity", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f", "large", "nhs"}

// NewWorkload builds the named workload.
func NewWorkload(p Params) (Workload, error) {
	if p.Keys == 0 {
		p.Keys = 10000
	}
	if p.KeySize <= 0 {
		p.KeySize = 8
	}
	if p.ValSize < 0 {
		return nil, fmt.Errorf("bench: --val-size must be >= 0")
	}
	if err := validIndexTerms(p); err != nil {
		return nil, err
	}
	switch p.Workload {
	case "put":
		return &putWL{p: p, val: randValue(max(p.ValSize, 0), 1)}, nil
	case "range":
		return &rangeWL{p: p, val: randValue(p.ValSize, 2)}, nil
	case "entity":
		mix := p.Mix
		if len(mix) == 0 {
			mix = map[string]int{"put": 50, "get": 50}
		}
		m, err := newMix(mix, []string{"put", "get"})
		if err != nil {
			return nil, err
		}
		return &entityWL{p: p, mix: m}, nil
	case "large":
		mix := p.Mix
		if len(mix) == 0 {
			mix = map[string]int{"put": 20, "get": 80}
		}
		m, err := newMix(mix, []string{"put", "get"})
		if err != nil {
			return nil, err
		}
		return &largeWL{p: p, mix: m, pool: randValue(16<<10+1024, 3)}, nil
	}
	if p.Workload == "nhs" {
		return newNHS(p)
	}
	if strings.HasPrefix(p.Workload, "ycsb-") {
		return newYCSB(p)
	}
	return nil, fmt.Errorf("bench: unknown workload %q (have %s)", p.Workload, strings.Join(Workloads, ", "))
}

// mix draws operation names with given weights.
type mix struct {
	names []string
	cum   []int
	total int
}

func newMix(weights map[string]int, allowed []string) (*mix, error) {
	m := &mix{}
	names := make([]string, 0, len(weights))
	for n := range weights {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ok := false
		for _, a := range allowed {
			ok = ok || a == n
		}
		if !ok {
			return nil, fmt.Errorf("bench: --mix operation %q not in %v", n, allowed)
		}
		if weights[n] < 0 {
			return nil, fmt.Errorf("bench: --mix weight of %s is negative", n)
		}
		if weights[n] == 0 {
			continue
		}
		m.total += weights[n]
		m.names = append(m.names, n)
		m.cum = append(m.cum, m.total)
	}
	if m.total == 0 {
		return nil, fmt.Errorf("bench: --mix has no positive weight")
	}
	return m, nil
}

func (m *mix) pick(r *rand.Rand) string {
	x := r.Intn(m.total)
	i := sort.SearchInts(m.cum, x+1)
	return m.names[i]
}

// ParseMix parses "put=50,get=50".
func ParseMix(s string) (map[string]int, error) {
	out := map[string]int{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || k == "" {
			return nil, fmt.Errorf("bench: bad --mix entry %q (want op=weight)", part)
		}
		out[k] = n
	}
	return out, nil
}

func randValue(n int, seed int64) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := rand.New(rand.NewSource(seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return b
}

// fixedKey is i in decimal, zero-padded to size digits (longer when i
// needs more), as fmt's %0*d.
func fixedKey(i uint64, size int) []byte {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], i, 10)
	k := make([]byte, max(size, len(d)))
	n := copy(k[len(k)-len(d):], d)
	for j := 0; j < len(k)-n; j++ {
		k[j] = '0'
	}
	return k
}

type putWL struct {
	p   Params
	val []byte
	seq atomic.Uint64
}

func (w *putWL) Name() string { return "put" }
func (w *putWL) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return 0, nil
}
func (w *putWL) Approximations() []string { return nil }
func (w *putWL) Next(r *rand.Rand) Op {
	var i uint64
	if w.p.Sequential {
		i = (w.seq.Add(1) - 1) % w.p.Keys
	} else {
		i = uint64(r.Int63n(int64(w.p.Keys)))
	}
	return Op{Name: "put", Kind: KindPut, Key: fixedKey(i, w.p.KeySize), Value: w.val, Index: benchTerms(r, w.p.IndexTerms)}
}

type rangeWL struct {
	p   Params
	val []byte
	seq atomic.Uint64
}

func (w *rangeWL) Name() string { return "range" }
func (w *rangeWL) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return w.p.Keys, func(i uint64) ([]byte, []byte) { return fixedKey(i, w.p.KeySize), w.val }
}
func (w *rangeWL) Approximations() []string {
	return []string{"range reads one key per request (etcd-benchmark range over a single key), drawn from the preloaded key space"}
}
func (w *rangeWL) Next(r *rand.Rand) Op {
	var i uint64
	if w.p.Sequential {
		i = (w.seq.Add(1) - 1) % w.p.Keys
	} else {
		i = uint64(r.Int63n(int64(w.p.Keys)))
	}
	return Op{Name: "range", Kind: KindGet, Key: fixedKey(i, w.p.KeySize)}
}

type entityWL struct {
	p   Params
	mix *mix
}

func (w *entityWL) Name() string { return "entity" }
func (w *entityWL) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return 0, nil
}
func (w *entityWL) Approximations() []string { return nil }
func (w *entityWL) Next(r *rand.Rand) Op {
	id := uint64(r.Int63n(int64(w.p.Keys))) + 1
	key := []byte(strconv.FormatUint(id, 10))
	if w.mix.pick(r) == "get" {
		return Op{Name: "get", Kind: KindEntityGet, Key: key}
	}
	val := []byte("value" + string(key))
	if w.p.ValSize > 0 {
		val = randValue(w.p.ValSize, int64(id))
	}
	return Op{Name: "put", Kind: KindEntityPut, Key: key, Value: val, Index: benchTerms(r, w.p.IndexTerms)}
}

type largeWL struct {
	p    Params
	mix  *mix
	pool []byte
}

func (w *largeWL) Name() string { return "large" }
func (w *largeWL) value(r *rand.Rand) []byte {
	n := 4<<10 + r.Intn(12<<10+1)
	off := r.Intn(len(w.pool) - n)
	return w.pool[off : off+n]
}
func (w *largeWL) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return w.p.Keys, func(i uint64) ([]byte, []byte) {
		return fixedKey(i, w.p.KeySize), w.value(rand.New(rand.NewSource(int64(i))))
	}
}
func (w *largeWL) Approximations() []string { return nil }
func (w *largeWL) Next(r *rand.Rand) Op {
	key := fixedKey(uint64(r.Int63n(int64(w.p.Keys))), w.p.KeySize)
	if w.mix.pick(r) == "get" {
		return Op{Name: "get", Kind: KindGet, Key: key}
	}
	return Op{Name: "update", Kind: KindPut, Key: key, Value: w.value(r)}
}
