package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is returned for bytes that do not decode.
var ErrMalformed = errors.New("wire: malformed message")

type writer struct{ b []byte }

func (w *writer) u8(v uint8)     { w.b = append(w.b, v) }
func (w *writer) u64(v uint64)   { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) i64(v int64)    { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) bytes(v []byte) { w.u64(uint64(len(v))); w.b = append(w.b, v...) }
func (w *writer) str(v string)   { w.u64(uint64(len(v))); w.b = append(w.b, v...) }

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
}

func (r *reader) u8() uint8 {
	if r.err != nil || len(r.b) < 1 {
		r.fail("short u8")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) i64() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns a slice aliasing the input.
func (r *reader) bytes() []byte {
	n := r.u64()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("short bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}
