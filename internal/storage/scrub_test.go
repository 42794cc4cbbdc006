package storage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLeafCutsTheRangeEvenly(t *testing.T) {
	cases := []struct {
		tok, start, end uint64
		leaves, want    int
	}{
		{0, 0, 0, 64, 0},
		{1<<63 - 1, 0, 0, 64, 31},
		{1 << 63, 0, 0, 64, 32},
		{^uint64(0), 0, 0, 64, 63},
		{100, 100, 200, 4, 0},
		{124, 100, 200, 4, 0},
		{125, 100, 200, 4, 1},
		{199, 100, 200, 4, 3},
		{^uint64(0), 1 << 62, 0, 3, 2},
		{1 << 62, 1 << 62, 0, 3, 0},
	}
	for _, c := range cases {
		if got := Leaf(c.tok, c.start, c.end, c.leaves); got != c.want {
			t.Errorf("Leaf(%#x, [%#x,%#x), %d) = %d, want %d", c.tok, c.start, c.end, c.leaves, got, c.want)
		}
	}
}

func putData(t *testing.T, e *Engine, kv map[uint64]string) {
	t.Helper()
	b := e.NewBatch()
	for tok, v := range kv {
		b.Set(DataKey(tok, []byte(fmt.Sprint("k", tok))), []byte(v))
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

func hashes(t *testing.T, e *Engine, start, end uint64) []uint64 {
	t.Helper()
	s := e.NewSnapshot()
	defer s.Close()
	h, _, err := DataHashes(s, start, end, 8)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Two engines with the same data hash alike; a changed value, a missing
// key or an extra one changes exactly the leaf of its token, and data
// outside the range changes nothing.
func TestDataHashesNameTheDifferingLeaf(t *testing.T) {
	a, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const start, end = 1 << 60, 1<<60 + 8000
	data := map[uint64]string{}
	for i := uint64(0); i < 8000; i += 37 {
		data[start+i] = fmt.Sprint("value-", i)
	}
	putData(t, a, data)
	putData(t, b, data)
	putData(t, b, map[uint64]string{end: "outside", start - 1: "outside too"})
	ha, hb := hashes(t, a, start, end), hashes(t, b, start, end)
	if !slices.Equal(ha, hb) {
		t.Fatalf("same data, different hashes:\n%x\n%x", ha, hb)
	}
	diff := func(x, y []uint64) (out []int) {
		for i := range x {
			if x[i] != y[i] {
				out = append(out, i)
			}
		}
		return out
	}
	putData(t, b, map[uint64]string{start + 37*3: "value-111 changed"}) // leaf 0
	if d := diff(ha, hashes(t, b, start, end)); !slices.Equal(d, []int{0}) {
		t.Fatalf("changed value in leaf 0: differing leaves %v", d)
	}
	putData(t, b, map[uint64]string{start + 37*3: "value-111"})
	putData(t, b, map[uint64]string{start + 7999: "extra"}) // leaf 7
	if d := diff(ha, hashes(t, b, start, end)); !slices.Equal(d, []int{7}) {
		t.Fatalf("extra key in leaf 7: differing leaves %v", d)
	}
	del := b.NewBatch()
	del.Delete(DataKey(start+7999, []byte(fmt.Sprint("k", start+7999))))
	del.Delete(DataKey(start+37*100, []byte(fmt.Sprint("k", start+37*100)))) // 3700: leaf 3
	if err := del.Commit(true); err != nil {
		t.Fatal(err)
	}
	if d := diff(ha, hashes(t, b, start, end)); !slices.Equal(d, []int{3}) {
		t.Fatalf("missing key in leaf 3: differing leaves %v", d)
	}
}

// A byte flipped inside an sstable's data block — a value the hashes
// cannot see until the block is read — is found by VerifyChecksums, which
// names the file; the untouched engine passes.
func TestVerifyChecksumsFindsAFlippedByte(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{ValueSeparation: -1})
	if err != nil {
		t.Fatal(err)
	}
	data := map[uint64]string{}
	for i := uint64(0); i < 2000; i++ {
		data[i<<40] = strings.Repeat(fmt.Sprintf("payload-%06d|", i), 4)
	}
	putData(t, e, data)
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	n, err := e.VerifyChecksums(context.Background())
	if err != nil || n == 0 {
		t.Fatalf("clean engine: %d tables, err %v", n, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip one byte a quarter into the table: in its data blocks (the
	// index, properties and footer are at its end).
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sstable after a flush")
	}
	flipped := filepath.Base(ssts[0])
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/4] ^= 0x01
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err = Open(dir, Options{ValueSeparation: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.VerifyChecksums(context.Background())
	if err == nil || !strings.Contains(err.Error(), flipped) {
		t.Fatalf("flipped a byte of %s: VerifyChecksums = %v, want an error naming it", flipped, err)
	}
}

// The corrupt fault's damage is the kind only a comparison of replicas
// finds: the values change (and with them the hashes), the versions stay,
// and every sstable still passes its checksums.
func TestCorruptValuesKeepsChecksumsValid(t *testing.T) {
	e, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	data := map[uint64]string{}
	for i := uint64(0); i < 100; i++ {
		data[1000+i] = string(EncodeValue(7+i, []byte(fmt.Sprint("value-", i))))
	}
	putData(t, e, data)
	before := hashes(t, e, 1000, 1100)
	keys, err := CorruptValues(e, 1000, 1100, 10, 3)
	if err != nil || len(keys) != 10 {
		t.Fatalf("CorruptValues: %d keys, %v", len(keys), err)
	}
	if slices.Equal(before, hashes(t, e, 1000, 1100)) {
		t.Fatal("changed values, same hashes")
	}
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := e.VerifyChecksums(context.Background()); err != nil || n == 0 {
		t.Fatalf("after the change: %d tables, %v", n, err)
	}
	b, err := e.Get(DataKey(1000, []byte("k1000")))
	if err != nil {
		t.Fatal(err)
	}
	if v, _, d, err := DecodeValueMeta(b); err != nil || v != 7 || string(d) == "value-0" || len(d) != len("value-0") {
		t.Fatalf("key 0 after the change: version %d, %q, %v", v, d, err)
	}
}

// BenchmarkDataHashes hashes a shard of 100 000 keys with 100-byte values
// into 64 leaves (one scrub of one replica's data).
func BenchmarkDataHashes(b *testing.B) {
	e, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const n = 100_000
	for i := 0; i < n; i += 10_000 {
		bt := e.NewBatch()
		for j := i; j < i+10_000; j++ {
			tok := uint64(j) * (1 << 40)
			bt.Set(DataKey(tok, []byte(fmt.Sprintf("key-%08d", j))), EncodeValue(uint64(j+1), bytes.Repeat([]byte{'v'}, 100)))
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := e.NewSnapshot()
		_, keys, err := DataHashes(s, 0, 0, 64)
		s.Close()
		if err != nil || keys != n {
			b.Fatalf("%d keys, %v", keys, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
}
