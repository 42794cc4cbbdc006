package bench

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestZipfianIsSkewed(t *testing.T) {
	z := newZipfian(1000)
	r := rand.New(rand.NewSource(1))
	counts := make([]int, 1000)
	const n = 200000
	for i := 0; i < n; i++ {
		v := z.next(r)
		if v >= 1000 {
			t.Fatalf("value %d out of range", v)
		}
		counts[v]++
	}
	// With theta 0.99 item 0 gets about 1/zeta(1000) ≈ 13% of draws and
	// item 1 about half of that; the top 10 items far more than 1%.
	if f := float64(counts[0]) / n; f < 0.10 || f > 0.16 {
		t.Fatalf("item 0 drawn %.3f of the time", f)
	}
	if r := float64(counts[0]) / float64(counts[1]); r < 1.6 || r > 2.4 {
		t.Fatalf("item0/item1 = %.2f, want about 2", r)
	}
	top := 0
	for _, c := range counts[:10] {
		top += c
	}
	if float64(top)/n < 0.3 {
		t.Fatalf("top 10 items only %.2f of draws", float64(top)/n)
	}
}

func TestUniformChooserIsFlat(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	counts := make([]int, 10)
	for i := 0; i < 100000; i++ {
		counts[uniformChooser{}.pick(r, 10)]++
	}
	for i, c := range counts {
		if c < 9000 || c > 11000 {
			t.Fatalf("bucket %d has %d of 100000", i, c)
		}
	}
}

func TestLatestFavoursNewRecords(t *testing.T) {
	l := latestChooser{newZipfian(1000)}
	r := rand.New(rand.NewSource(3))
	newest := 0
	for i := 0; i < 10000; i++ {
		if v := l.pick(r, 1000); v >= 990 {
			newest++
		} else if v >= 1000 {
			t.Fatal("out of range")
		}
	}
	if newest < 3000 {
		t.Fatalf("newest 1%% of records drawn %d/10000 times", newest)
	}
}

func proportions(t *testing.T, w Workload, n int) map[string]float64 {
	r := rand.New(rand.NewSource(4))
	c := map[string]int{}
	for i := 0; i < n; i++ {
		c[w.Next(r).Name]++
	}
	out := map[string]float64{}
	for k, v := range c {
		out[k] = float64(v) / float64(n)
	}
	return out
}

func TestYCSBProportions(t *testing.T) {
	for letter, want := range ycsbMixes {
		w, err := NewWorkload(Params{Workload: "ycsb-" + string(letter), Records: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := proportions(t, w, 50000)
		for op, pct := range want {
			if math.Abs(got[op]-float64(pct)/100) > 0.01 {
				t.Fatalf("ycsb-%c %s: %.3f want %.2f", letter, op, got[op], float64(pct)/100)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("ycsb-%c produced %v", letter, got)
		}
	}
}

func TestEntityMixAndValues(t *testing.T) {
	w, err := NewWorkload(Params{Workload: "entity", Keys: 50, Mix: map[string]int{"put": 30, "get": 70}})
	if err != nil {
		t.Fatal(err)
	}
	got := proportions(t, w, 50000)
	if math.Abs(got["put"]-0.3) > 0.01 || math.Abs(got["get"]-0.7) > 0.01 {
		t.Fatalf("mix %v", got)
	}
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 1000; i++ {
		op := w.Next(r)
		if op.Kind == KindEntityPut && string(op.Value) != "value"+string(op.Key) {
			t.Fatalf("entity value %q for id %q", op.Value, op.Key)
		}
	}
	if _, err := NewWorkload(Params{Workload: "entity", Mix: map[string]int{"scan": 1}}); err == nil {
		t.Fatal("unknown mix op accepted")
	}
	if _, err := NewWorkload(Params{Workload: "nope"}); err == nil {
		t.Fatal("unknown workload accepted")
	}
}

func TestPutKeysAndLargeValues(t *testing.T) {
	w, _ := NewWorkload(Params{Workload: "put", KeySize: 8, ValSize: 256, Keys: 5, Sequential: true})
	r := rand.New(rand.NewSource(6))
	for i := 0; i < 10; i++ {
		op := w.Next(r)
		if len(op.Key) != 8 || len(op.Value) != 256 || string(op.Key) != fmtKey(i%5) {
			t.Fatalf("op %d: key %q (%d bytes) value %d bytes", i, op.Key, len(op.Key), len(op.Value))
		}
	}
	l, _ := NewWorkload(Params{Workload: "large"})
	for i := 0; i < 1000; i++ {
		op := l.Next(r)
		if op.Kind == KindPut && (len(op.Value) < 4<<10 || len(op.Value) > 16<<10) {
			t.Fatalf("large value of %d bytes", len(op.Value))
		}
	}
	if got := proportions(t, l, 20000)["update"]; got < 0.1 {
		t.Fatalf("large workload updates %.2f < 10%%", got)
	}
}

func fmtKey(i int) string { return string(fixedKey(uint64(i), 8)) }

func TestRecorderPercentilesAndWarmup(t *testing.T) {
	start := time.Unix(1000, 0)
	rec := result.NewRecorder(start, ErrKind)
	rec.Record("get", start.Add(-2*time.Second), start.Add(time.Second), nil) // due in the warm-up: dropped
	for i := 1; i <= 1000; i++ {
		end := start.Add(time.Duration(i) * time.Millisecond)
		rec.Record("get", end.Add(-time.Duration(i)*time.Microsecond*10), end, nil) // latencies 10 µs .. 10 ms
	}
	rec.Record("put", start, start.Add(time.Millisecond), &StatusError{Code: 503})
	rec.Record("get", start, start.Add(time.Millisecond), ErrNotFound)
	all, per := rec.Results(2 * time.Second)
	g := per["get"]
	if g.Ops != 1001 || g.NotFound != 1 || g.Errors != 0 {
		t.Fatalf("get counts %+v", g)
	}
	if math.Abs(g.Latency.P50-5.0) > 0.1 || math.Abs(g.Latency.P99-9.9) > 0.1 || math.Abs(g.Latency.Max-10) > 0.05 {
		t.Fatalf("percentiles p50 %.3f p99 %.3f max %.3f", g.Latency.P50, g.Latency.P99, g.Latency.Max)
	}
	if all.Errors != 1 || all.ErrorKinds["http_503"] != 1 {
		t.Fatalf("errors %d kinds %v", all.Errors, all.ErrorKinds)
	}
	if math.Abs(g.Throughput-1001.0/2) > 0.01 {
		t.Fatalf("throughput %.2f", g.Throughput)
	}
}

// memDriver is an in-memory Driver for runner tests.
type memDriver struct {
	mu    sync.Mutex
	data  map[string][]byte
	puts  int
	gets  int
	scans int
}

func (m *memDriver) Put(_ context.Context, _ int, k, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[string(k)] = v
	m.puts++
	return nil
}
func (m *memDriver) Get(_ context.Context, _ int, k []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if _, ok := m.data[string(k)]; !ok {
		return ErrNotFound
	}
	return nil
}
func (m *memDriver) Scan(_ context.Context, _ int, _ []byte, _ int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scans++
	return nil
}
func (m *memDriver) EntityPut(ctx context.Context, c int, k, v []byte) error {
	return m.Put(ctx, c, k, v)
}
func (m *memDriver) EntityGet(ctx context.Context, c int, k []byte) error { return m.Get(ctx, c, k) }
func (m *memDriver) Close() error                                         { return nil }

func TestRunTotalPreloadAndFiles(t *testing.T) {
	d := &memDriver{data: map[string][]byte{}}
	w, _ := NewWorkload(Params{Workload: "range", Keys: 100})
	n, err := Preload(context.Background(), d, w, 8, time.Second)
	if err != nil || n != 100 || len(d.data) != 100 {
		t.Fatalf("preload: %d %v (%d keys)", n, err, len(d.data))
	}
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 4, Conns: 2, Total: 500})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Ops != 500 || run.All.NotFound != 0 || d.gets != 500 {
		t.Fatalf("ran %d ops (%d not found), driver saw %d gets", run.All.Ops, run.All.NotFound, d.gets)
	}
	res := &result.Result{Workload: "range", Target: "mem", Machine: result.ThisMachine("test")}
	res.Fill(run)
	dir := t.TempDir()
	if err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"workload", "target", "ops", "errors", "throughput", "latency_ms", "params", "machine", "operations", "series"} {
		if _, ok := top[f]; !ok {
			t.Fatalf("results.json lacks %q", f)
		}
	}
	lat := top["latency_ms"].(map[string]any)
	for _, f := range []string{"mean", "p50", "p75", "p90", "p99", "p999", "max"} {
		if _, ok := lat[f]; !ok {
			t.Fatalf("latency_ms lacks %q", f)
		}
	}
	if m := top["machine"].(map[string]any); m["cpus"].(float64) < 1 || m["go_version"] == "" {
		t.Fatalf("machine %v", m)
	}
	f, err := os.Open(filepath.Join(dir, "range.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 1 {
		t.Fatalf("csv: %v", err)
	}
	if got := rows[0]; len(got) != len(result.CSVHeader) || got[0] != "elapsed" || got[10] != "errors" {
		t.Fatalf("csv header %v", got)
	}
	// Data rows: numbers, latencies in µs in order, operations adding up.
	var csvOps float64
	for _, row := range rows[1:] {
		v := make([]float64, len(row))
		for i, c := range row {
			if v[i], err = strconv.ParseFloat(c, 64); err != nil {
				t.Fatalf("csv row %v: column %s: %v", row, result.CSVHeader[i], err)
			}
		}
		// min <= median <= 95th <= 99th <= 99_9th <= max, mean within.
		if v[2] > 0 && !(v[3] <= v[5] && v[5] <= v[6] && v[6] <= v[7] && v[7] <= v[8] && v[8] <= v[9] && v[3] <= v[4] && v[4] <= v[9]) {
			t.Fatalf("csv row out of order: %v", row)
		}
		csvOps += v[2]
	}
	if len(rows) < 2 || csvOps != 500 {
		t.Fatalf("csv rows count %v operations, want 500", csvOps)
	}
	back, err := result.ReadResult(dir)
	if err != nil || back.Ops != 500 {
		t.Fatalf("read back: %v %+v", err, back)
	}
}

func TestOpenLoopCountsFromIntendedTime(t *testing.T) {
	// A driver that takes 20 ms per call with one client at 200 ops/s
	// cannot keep up: latency measured from the due time must grow far
	// beyond the 20 ms service time (no coordinated omission).
	d := &slowDriver{delay: 20 * time.Millisecond}
	w, _ := NewWorkload(Params{Workload: "put", Keys: 10})
	run, err := Run(context.Background(), d, w, RunConfig{Clients: 1, Rate: 200, Duration: 1 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if run.All.Latency.Max < 200 {
		t.Fatalf("max latency %.1f ms: queueing behind the schedule was hidden", run.All.Latency.Max)
	}
}

type slowDriver struct{ delay time.Duration }

func (s *slowDriver) Put(ctx context.Context, _ int, _, _ []byte) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (s *slowDriver) Get(ctx context.Context, c int, k []byte) error { return s.Put(ctx, c, k, nil) }
func (s *slowDriver) Scan(ctx context.Context, c int, k []byte, _ int) error {
	return s.Put(ctx, c, k, nil)
}
func (s *slowDriver) EntityPut(ctx context.Context, c int, k, v []byte) error {
	return s.Put(ctx, c, k, v)
}
func (s *slowDriver) EntityGet(ctx context.Context, c int, k []byte) error {
	return s.Put(ctx, c, k, nil)
}
func (s *slowDriver) Close() error { return nil }

func TestErrKind(t *testing.T) {
	if k := ErrKind(context.DeadlineExceeded); k != "timeout" {
		t.Fatal(k)
	}
	if k := ErrKind(&StatusError{Code: 504}); k != "http_504" {
		t.Fatal(k)
	}
	if k := ErrKind(errors.New("x")); k != "other" {
		t.Fatal(k)
	}
}

func TestFixedKeyPadsLikeFmt(t *testing.T) {
	for _, c := range []struct {
		i    uint64
		size int
	}{{0, 8}, {7, 8}, {12345678, 8}, {123456789, 8}, {42, 0}, {1 << 63, 4}} {
		if got, want := string(fixedKey(c.i, c.size)), fmt.Sprintf("%0*d", c.size, c.i); got != want {
			t.Fatalf("fixedKey(%d, %d) = %q, want %q", c.i, c.size, got, want)
		}
	}
}
