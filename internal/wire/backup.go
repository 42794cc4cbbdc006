package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// A shard backup stream, what a node sends for GET
// /v1/admin/backup/shards/{id} and what a backup keeps per shard:
//
//	header:  one line of JSON (BackupHeader), then '\n'
//	records: uvarint(len key) key uvarint(version)
//	         uvarint(len terms) terms (AppendIndexTerms; empty: none)
//	         uvarint(len data) data
//	end:     0x00 (no key is empty), count (8 bytes), xxhash64 of every
//	         record's bytes (8 bytes), big-endian
//
// Records are in the shard's storage order. A stream cut short, or altered,
// fails its reader at the end.

// BackupHeader describes one shard's backup.
type BackupHeader struct {
	Format     int    `json:"format"`
	Shard      uint64 `json:"shard"`
	TokenStart uint64 `json:"token_start"`
	TokenEnd   uint64 `json:"token_end"` // 0: 2^64
	Epoch      uint64 `json:"epoch"`
	// Applied is the shard's applied index the data reflects.
	Applied uint64 `json:"applied"`
}

// BackupFormat is the stream format written.
const BackupFormat = 1

// ErrBadBackup: a backup stream that does not decode or whose end does not
// match its records.
var ErrBadBackup = errors.New("wire: bad backup stream")

// BackupWriter writes one shard's backup stream.
type BackupWriter struct {
	w     *bufio.Writer
	h     *xxhash.Digest
	count uint64
	buf   []byte
}

// NewBackupWriter writes hdr to w and returns the writer of its records.
func NewBackupWriter(w io.Writer, hdr BackupHeader) (*BackupWriter, error) {
	hdr.Format = BackupFormat
	b, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	bw := &BackupWriter{w: bufio.NewWriterSize(w, 256<<10), h: xxhash.New()}
	if _, err := bw.w.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	return bw, nil
}

// Add writes one key's record: its version, secondary-index terms and
// value. key must not be empty.
func (bw *BackupWriter) Add(key []byte, version uint64, terms []IndexTerm, data []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrBadBackup)
	}
	b := bw.buf[:0]
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, version)
	var enc []byte
	if len(terms) > 0 {
		enc = AppendIndexTerms(nil, terms)
	}
	b = binary.AppendUvarint(b, uint64(len(enc)))
	b = append(b, enc...)
	b = binary.AppendUvarint(b, uint64(len(data)))
	bw.buf = b
	_, _ = bw.h.Write(b)
	_, _ = bw.h.Write(data)
	bw.count++
	if _, err := bw.w.Write(b); err != nil {
		return err
	}
	_, err := bw.w.Write(data)
	return err
}

// Close writes the end of the stream and flushes it; it does not close
// the underlying writer.
func (bw *BackupWriter) Close() error {
	end := []byte{0}
	end = binary.BigEndian.AppendUint64(end, bw.count)
	end = binary.BigEndian.AppendUint64(end, bw.h.Sum64())
	if _, err := bw.w.Write(end); err != nil {
		return err
	}
	return bw.w.Flush()
}

// BackupReader reads one shard's backup stream.
type BackupReader struct {
	r      *bufio.Reader
	h      *xxhash.Digest
	count  uint64
	done   bool
	Header BackupHeader
}

// maxBackupLine bounds the header line.
const maxBackupLine = 64 << 10

// NewBackupReader reads the stream's header.
func NewBackupReader(r io.Reader) (*BackupReader, error) {
	br := &BackupReader{r: bufio.NewReaderSize(r, 256<<10), h: xxhash.New()}
	line, err := br.r.ReadSlice('\n')
	if err != nil || len(line) > maxBackupLine {
		return nil, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	if err := json.Unmarshal(line, &br.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	if br.Header.Format != BackupFormat {
		return nil, fmt.Errorf("%w: format %d, this Cairn reads %d", ErrBadBackup, br.Header.Format, BackupFormat)
	}
	return br, nil
}

// BackupRecord is one key of a backup stream; its slices are fresh.
type BackupRecord struct {
	Key     []byte
	Version uint64
	Terms   []IndexTerm
	Data    []byte
}

// Next returns the next record, or io.EOF after the last one once the
// stream's end matched the records read. maxKey and maxData bound what a
// record may claim.
func (br *BackupReader) Next(maxKey, maxData int) (BackupRecord, error) {
	var rec BackupRecord
	if br.done {
		return rec, io.EOF
	}
	cut := func(err error) error { return fmt.Errorf("%w: cut short: %v", ErrBadBackup, err) }
	n, err := binary.ReadUvarint(br.r)
	if err != nil {
		return rec, cut(err)
	}
	if n == 0 {
		return rec, br.end()
	}
	if n > uint64(maxKey) {
		return rec, fmt.Errorf("%w: key of %d bytes", ErrBadBackup, n)
	}
	rec.Key = make([]byte, n)
	if _, err := io.ReadFull(br.r, rec.Key); err != nil {
		return rec, cut(err)
	}
	if rec.Version, err = binary.ReadUvarint(br.r); err != nil {
		return rec, cut(err)
	}
	tn, err := binary.ReadUvarint(br.r)
	if err != nil || tn > MaxIndexBytes+1024 {
		return rec, fmt.Errorf("%w: index terms of %d bytes: %v", ErrBadBackup, tn, err)
	}
	enc := make([]byte, tn)
	if _, err := io.ReadFull(br.r, enc); err != nil {
		return rec, cut(err)
	}
	if tn > 0 {
		if rec.Terms, err = DecodeIndexTerms(enc); err != nil {
			return rec, fmt.Errorf("%w: index terms: %v", ErrBadBackup, err)
		}
	}
	dn, err := binary.ReadUvarint(br.r)
	if err != nil || dn > uint64(maxData) {
		return rec, fmt.Errorf("%w: value length %d: %v", ErrBadBackup, dn, err)
	}
	if rec.Data, err = readN(br.r, dn); err != nil {
		return rec, cut(err)
	}
	var b []byte
	b = binary.AppendUvarint(b, n)
	b = append(b, rec.Key...)
	b = binary.AppendUvarint(b, rec.Version)
	b = binary.AppendUvarint(b, tn)
	b = append(b, enc...)
	b = binary.AppendUvarint(b, dn)
	_, _ = br.h.Write(b)
	_, _ = br.h.Write(rec.Data)
	br.count++
	return rec, nil
}

// readChunk bounds what readN allocates ahead of the bytes it has read.
const readChunk = 1 << 20

// readN reads n bytes from r. Its memory grows with the bytes read, not
// with n: a length field that claims more than the stream holds (damage,
// a file cut short) costs no more than the stream's rest.
func readN(r io.Reader, n uint64) ([]byte, error) {
	if n <= readChunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	buf.Grow(readChunk)
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func (br *BackupReader) end() error {
	var t [16]byte
	if _, err := io.ReadFull(br.r, t[:]); err != nil {
		return fmt.Errorf("%w: end cut short: %v", ErrBadBackup, err)
	}
	if c, h := binary.BigEndian.Uint64(t[:8]), binary.BigEndian.Uint64(t[8:]); c != br.count || h != br.h.Sum64() {
		return fmt.Errorf("%w: end says %d records (hash %x), read %d (hash %x)", ErrBadBackup, c, h, br.count, br.h.Sum64())
	}
	if _, err := br.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: bytes after the end", ErrBadBackup)
	}
	br.done = true
	return io.EOF
}

// Count is the number of records read so far.
func (br *BackupReader) Count() uint64 { return br.count }
