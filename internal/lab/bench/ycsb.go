package bench

import (
	"fmt"
	"math/rand"
	"strconv"
	"sync/atomic"
)

// ycsb is one of the YCSB core workloads A–F. A record is one key holding
// FieldCount fields of FieldLength bytes, stored as one value.
type ycsb struct {
	p       Params
	letter  byte
	mix     *mix
	chooser keyChooser
	count   atomic.Uint64 // records inserted so far (load + run inserts)
	val     []byte
}

// ycsbMixes are the core workloads' operation proportions.
var ycsbMixes = map[byte]map[string]int{
	'a': {"read": 50, "update": 50},
	'b': {"read": 95, "update": 5},
	'c': {"read": 100},
	'd': {"read": 95, "insert": 5},
	'e': {"scan": 95, "insert": 5},
	'f': {"read": 50, "rmw": 50},
}

func newYCSB(p Params) (Workload, error) {
	if len(p.Workload) != 6 {
		return nil, fmt.Errorf("bench: unknown workload %q", p.Workload)
	}
	letter := p.Workload[5]
	weights, ok := ycsbMixes[letter]
	if !ok {
		return nil, fmt.Errorf("bench: unknown YCSB workload %q (a–f)", p.Workload)
	}
	if p.Records == 0 {
		p.Records = 1000
	}
	if p.FieldCount == 0 {
		p.FieldCount = 10
	}
	if p.FieldLength == 0 {
		p.FieldLength = 100
	}
	m, err := newMix(weights, []string{"read", "update", "insert", "scan", "rmw"})
	if err != nil {
		return nil, err
	}
	w := &ycsb{p: p, letter: letter, mix: m, val: randValue(p.FieldCount*p.FieldLength, 5)}
	dist := p.Distribution
	if dist == "" {
		dist = "zipfian"
		if letter == 'd' {
			dist = "latest"
		}
	}
	// Zipfian over the record count plus room for inserts.
	z := newZipfian(p.Records * 2)
	switch dist {
	case "zipfian":
		w.chooser = scrambledZipf{z}
	case "uniform":
		w.chooser = uniformChooser{}
	case "latest":
		w.chooser = latestChooser{newZipfian(p.Records)}
	default:
		return nil, fmt.Errorf("bench: --distribution must be zipfian, uniform or latest")
	}
	w.count.Store(p.Records)
	return w, nil
}

func (w *ycsb) Name() string { return w.p.Workload }

// recordKey is YCSB's "user" + hashed key number.
func recordKey(n uint64) []byte { return []byte("user" + strconv.FormatUint(fnv64(n), 10)) }

func (w *ycsb) Preload() (uint64, func(uint64) ([]byte, []byte)) {
	return w.p.Records, func(i uint64) ([]byte, []byte) { return recordKey(i), w.val }
}

func (w *ycsb) Approximations() []string {
	out := []string{"a record is one value of field_count × field_length bytes; an update rewrites the whole record"}
	switch w.letter {
	case 'e':
		out = append(out, "scan: one ordered read of L records (uniform 1–100) from a record's key: GET /v1/kv?start=K&limit=L on Cairn (keys and values, linearizable unless --consistency s), a Range from K with limit L on etcd")
	case 'f':
		out = append(out, "read-modify-write: a read followed by a write of the record (not conditional)")
	}
	return out
}

func (w *ycsb) Next(r *rand.Rand) Op {
	n := w.count.Load()
	switch w.mix.pick(r) {
	case "read":
		return Op{Name: "read", Kind: KindGet, Key: recordKey(w.chooser.pick(r, n))}
	case "update":
		return Op{Name: "update", Kind: KindPut, Key: recordKey(w.chooser.pick(r, n)), Value: w.val}
	case "insert":
		k := w.count.Add(1) - 1
		return Op{Name: "insert", Kind: KindPut, Key: recordKey(k), Value: w.val}
	case "scan":
		return Op{Name: "scan", Kind: KindScan, Key: recordKey(w.chooser.pick(r, n)), Limit: r.Intn(100) + 1}
	default: // rmw
		return Op{Name: "rmw", Kind: KindRMW, Key: recordKey(w.chooser.pick(r, n)), Value: w.val}
	}
}
