package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
)

func writeStream(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	bw, err := NewBackupWriter(&buf, BackupHeader{Shard: 3, TokenStart: 10, TokenEnd: 20, Epoch: 2, Applied: 99})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var terms []IndexTerm
		if i%3 == 0 {
			terms = []IndexTerm{{Name: "age_int", Term: EncodeIntTerm(int64(i))}, {Name: "email_bin", Term: []byte(fmt.Sprint("u", i))}}
		}
		if err := bw.Add([]byte(fmt.Sprintf("key-%d", i)), uint64(i+1), terms, bytes.Repeat([]byte{byte(i)}, i%50)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Add(nil, 1, nil, nil); err == nil {
		t.Fatal("an empty key was accepted")
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(b []byte) (BackupHeader, int, error) {
	br, err := NewBackupReader(bytes.NewReader(b))
	if err != nil {
		return BackupHeader{}, 0, err
	}
	n := 0
	for {
		rec, err := br.Next(1024, 1024)
		if err == io.EOF {
			return br.Header, n, nil
		}
		if err != nil {
			return br.Header, n, err
		}
		if string(rec.Key) != fmt.Sprintf("key-%d", n) || rec.Version != uint64(n+1) || !bytes.Equal(rec.Data, bytes.Repeat([]byte{byte(n)}, n%50)) {
			return br.Header, n, fmt.Errorf("record %d: %q v%d %x", n, rec.Key, rec.Version, rec.Data)
		}
		if wantTerms := n%3 == 0; wantTerms != (len(rec.Terms) == 2) || wantTerms && (rec.Terms[0].Text() != fmt.Sprint(n) || rec.Terms[1].Text() != fmt.Sprint("u", n)) {
			return br.Header, n, fmt.Errorf("record %d: terms %v", n, rec.Terms)
		}
		n++
	}
}

func TestBackupStreamRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 1000} {
		hdr, got, err := readAll(writeStream(t, n))
		if err != nil || got != n || hdr.Shard != 3 || hdr.Applied != 99 || hdr.TokenEnd != 20 || hdr.Format != BackupFormat {
			t.Fatalf("%d records: read %d, header %+v, err %v", n, got, hdr, err)
		}
	}
}

// Every way a stream can be damaged is caught by its reader.
func TestBackupStreamDamage(t *testing.T) {
	good := writeStream(t, 100)
	hdrLen := bytes.IndexByte(good, '\n') + 1
	cases := map[string][]byte{
		"cut in a record":    good[:len(good)/2],
		"cut at the end":     good[:len(good)-5],
		"no end":             good[:len(good)-17],
		"trailing bytes":     append(append([]byte(nil), good...), 0),
		"flipped value byte": flip(good, hdrLen+20),
		"flipped count":      flip(good, len(good)-9),
		"flipped hash":       flip(good, len(good)-1),
		"empty":              nil,
		"other format":       bytes.Replace(good, []byte(`"format":1`), []byte(`"format":7`), 1),
	}
	for name, b := range cases {
		if err := drain(b); !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", name, err)
		}
	}
	if err := drain(good); err != nil {
		t.Fatalf("the undamaged stream: %v", err)
	}
}

// drain reads a stream to its end without looking at the records.
func drain(b []byte) error {
	br, err := NewBackupReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	for {
		if _, err := br.Next(1024, 1024); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// A record whose length field claims far more than the stream holds (a
// flipped byte, a file cut short) fails as cut short without the reader
// first allocating what it claims: memory follows the bytes read.
func TestBackupReaderDoesNotAllocateAClaimedLength(t *testing.T) {
	var buf bytes.Buffer
	bw, err := NewBackupWriter(&buf, BackupHeader{Shard: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := bw.Add([]byte("k"), 1, nil, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.LastIndex(b, []byte{1, 'v'}) // the value's length, 1
	claim := binary.AppendUvarint(nil, 900<<20)
	b = append(append(append([]byte(nil), b[:i]...), claim...), b[i+1:]...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	br, err := NewBackupReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, err = br.Next(64<<10, 1<<30)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBadBackup) {
		t.Fatalf("a record claiming 900 MiB in a %d-byte stream: %v, want ErrBadBackup", len(b), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading it allocated %d MiB", grew>>20)
	}
}
