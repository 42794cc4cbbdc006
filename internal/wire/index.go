package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Bounds of an object's secondary-index terms (2i). They keep a write's
// index entries small next to the object, and the decoders bounded.
const (
	// MaxIndexName is the longest index name, in bytes.
	MaxIndexName = 64
	// MaxIndexTermSize is the longest _bin term, in bytes.
	MaxIndexTermSize = 1024
	// MaxIndexTerms is the most terms one object carries, all indexes
	// together.
	MaxIndexTerms = 64
	// MaxIndexBytes bounds the encoded terms of one object (names and
	// terms).
	MaxIndexBytes = 16 << 10
)

// Index kinds, by the suffix of the index name.
const (
	IndexSuffixBin = "_bin"
	IndexSuffixInt = "_int"
)

// EtcdLeaseIndex is the index whose term is the etcd lease a key was put
// with (the etcd API's; internal/api/etcd/lease_term.go).
const EtcdLeaseIndex = "etcd-lease_int"

// ErrBadIndex is returned for an index name or term that is not valid.
var ErrBadIndex = errors.New("wire: bad index")

// IndexTerm is one term of an object in a secondary index. Term is the
// term's sort encoding: the bytes themselves for a _bin index, and for an
// _int index the integer as 8 bytes big-endian with the sign bit flipped,
// so that byte order is integer order.
type IndexTerm struct {
	Name string
	Term []byte
}

// ValidIndexName reports why name is not an index name: letters, digits,
// '_' and '-', at most MaxIndexName bytes, ending in _bin or _int.
func ValidIndexName(name string) error {
	if len(name) == 0 || len(name) > MaxIndexName {
		return fmt.Errorf("%w: name %q: want 1 to %d bytes", ErrBadIndex, name, MaxIndexName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: name %q: only letters, digits, '_' and '-' are allowed", ErrBadIndex, name)
		}
	}
	if !strings.HasSuffix(name, IndexSuffixBin) && !strings.HasSuffix(name, IndexSuffixInt) || len(name) == 4 {
		return fmt.Errorf("%w: name %q: want a name ending in _bin or _int", ErrBadIndex, name)
	}
	return nil
}

// IsIntIndex reports whether name is an _int index.
func IsIntIndex(name string) bool { return strings.HasSuffix(name, IndexSuffixInt) }

// EncodeIntTerm is the sort encoding of an _int term.
func EncodeIntTerm(v int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)^(1<<63))
}

// DecodeIntTerm decodes EncodeIntTerm.
func DecodeIntTerm(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: integer term of %d bytes", ErrBadIndex, len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), nil
}

// ParseIndexTerm parses the text of a term of index name (a decimal
// integer for _int, any non-empty bytes up to MaxIndexTermSize for _bin).
func ParseIndexTerm(name, text string) (IndexTerm, error) {
	if err := ValidIndexName(name); err != nil {
		return IndexTerm{}, err
	}
	if IsIntIndex(name) {
		v, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return IndexTerm{}, fmt.Errorf("%w: %s: %q is not a 64-bit integer", ErrBadIndex, name, text)
		}
		return IndexTerm{Name: name, Term: EncodeIntTerm(v)}, nil
	}
	if len(text) == 0 || len(text) > MaxIndexTermSize {
		return IndexTerm{}, fmt.Errorf("%w: %s: a term of %d bytes: want 1 to %d", ErrBadIndex, name, len(text), MaxIndexTermSize)
	}
	return IndexTerm{Name: name, Term: []byte(text)}, nil
}

// Text is the term as a client wrote it (the integer in decimal for _int).
func (t IndexTerm) Text() string {
	if IsIntIndex(t.Name) {
		if v, err := DecodeIntTerm(t.Term); err == nil {
			return strconv.FormatInt(v, 10)
		}
	}
	return string(t.Term)
}

// NormalizeIndex sorts terms by (name, term), drops duplicates and checks
// every name and term and the bounds; the result is the canonical form
// commands carry (so a retry with its headers in another order is the
// same write).
func NormalizeIndex(terms []IndexTerm) ([]IndexTerm, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	out := slices.Clone(terms)
	slices.SortFunc(out, compareTerms)
	out = slices.CompactFunc(out, func(a, b IndexTerm) bool { return compareTerms(a, b) == 0 })
	if len(out) > MaxIndexTerms {
		return nil, fmt.Errorf("%w: %d terms: at most %d per object", ErrBadIndex, len(out), MaxIndexTerms)
	}
	size := 0
	for _, t := range out {
		if err := checkTerm(t); err != nil {
			return nil, err
		}
		size += len(t.Name) + len(t.Term)
	}
	if size > MaxIndexBytes {
		return nil, fmt.Errorf("%w: %d bytes of index terms: at most %d per object", ErrBadIndex, size, MaxIndexBytes)
	}
	return out, nil
}

func compareTerms(a, b IndexTerm) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return bytes.Compare(a.Term, b.Term)
}

func checkTerm(t IndexTerm) error {
	if err := ValidIndexName(t.Name); err != nil {
		return err
	}
	if IsIntIndex(t.Name) {
		if len(t.Term) != 8 {
			return fmt.Errorf("%w: %s: an integer term of %d bytes", ErrBadIndex, t.Name, len(t.Term))
		}
	} else if len(t.Term) == 0 || len(t.Term) > MaxIndexTermSize {
		return fmt.Errorf("%w: %s: a term of %d bytes: want 1 to %d", ErrBadIndex, t.Name, len(t.Term), MaxIndexTermSize)
	}
	return nil
}

// AppendIndexTerms appends the encoding of terms to b: a count, then each
// name and term length-prefixed. The stored value's metadata holds the
// same encoding.
func AppendIndexTerms(b []byte, terms []IndexTerm) []byte {
	w := writer{b: b}
	w.u64(uint64(len(terms)))
	for _, t := range terms {
		w.str(t.Name)
		w.bytes(t.Term)
	}
	return w.b
}

// DecodeIndexTerms decodes AppendIndexTerms (the terms alias b), checking
// every name and term.
func DecodeIndexTerms(b []byte) ([]IndexTerm, error) {
	r := reader{b: b}
	terms, err := r.indexTerms()
	if err != nil {
		return nil, err
	}
	return terms, r.done()
}

func (r *reader) indexTerms() ([]IndexTerm, error) {
	n := r.u64()
	if r.err == nil && n > MaxIndexTerms {
		r.fail("too many index terms")
	}
	if r.err != nil || n == 0 {
		return nil, r.err
	}
	terms := make([]IndexTerm, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		t := IndexTerm{Name: r.str(), Term: r.bytes()}
		if r.err == nil {
			if err := checkTerm(t); err != nil {
				r.fail(err.Error())
			}
		}
		terms = append(terms, t)
	}
	return terms, r.err
}
