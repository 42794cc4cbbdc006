package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
		if err := bw.Add([]byte(fmt.Sprintf("key-%d", i)), uint64(i+1), bytes.Repeat([]byte{byte(i)}, i%50)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Add(nil, 1, nil); err == nil {
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
		key, version, data, err := br.Next(1024, 1024)
		if err == io.EOF {
			return br.Header, n, nil
		}
		if err != nil {
			return br.Header, n, err
		}
		if string(key) != fmt.Sprintf("key-%d", n) || version != uint64(n+1) || !bytes.Equal(data, bytes.Repeat([]byte{byte(n)}, n%50)) {
			return br.Header, n, fmt.Errorf("record %d: %q v%d %x", n, key, version, data)
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
		if _, _, _, err := br.Next(1024, 1024); err != nil {
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
