package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/internal/wire"
)

// The derived, node-global ordered indexes (see docs/indexes.md). Both
// are derived from the data keys alone and written in the same batch as
// the data they describe:
//
//	0x04 user-key                           -> token(8)  key order
//	0x05 index-name 0x00 term' user-key     -> token(8)  secondary index
//
// term' is the term's sort encoding: an _int term's 8 bytes (integer order
// already), a _bin term escaped (0x00 -> 0x00 0xff) and closed by 0x00
// 0x01, so that (term, key) pairs sort by term first, then key, whatever
// bytes either holds. An index name holds no 0x00 (wire.ValidIndexName).
// The entries hold no shard id: a scan for a set of shards keeps those
// whose token falls in one of the shards' ranges, so a split rewrites
// nothing.
const (
	prefixKeyOrder = 0x04
	prefixIndex    = 0x05
	// prefixDerivedEnd bounds both: [prefixKeyOrder, prefixDerivedEnd).
	prefixDerivedEnd = 0x06
)

// KeyOrderPrefix bounds the key-order entries: [KeyOrderPrefix, PrefixEnd).
func KeyOrderPrefix() []byte { return []byte{prefixKeyOrder} }

// KeyOrderKey is the key-order entry of user key k.
func KeyOrderKey(k []byte) []byte {
	return append(append(make([]byte, 0, 1+len(k)), prefixKeyOrder), k...)
}

// IndexPrefix bounds the entries of index name.
func IndexPrefix(name string) []byte {
	b := make([]byte, 0, 2+len(name))
	b = append(b, prefixIndex)
	b = append(b, name...)
	return append(b, 0)
}

// AppendTerm appends term's sort encoding in index name to b.
func AppendTerm(b []byte, name string, term []byte) []byte {
	if wire.IsIntIndex(name) {
		return append(b, term...)
	}
	for _, c := range term {
		if c == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, c)
		}
	}
	return append(b, 0, 1)
}

// IndexSortKey is the place of (term, key) in index name: the encoded
// term followed by the key.
func IndexSortKey(name string, term, key []byte) []byte {
	b := AppendTerm(make([]byte, 0, len(term)+2+len(key)), name, term)
	return append(b, key...)
}

// IndexKey is the entry of (term, key) in index name.
func IndexKey(name string, term, key []byte) []byte {
	b := IndexPrefix(name)
	b = AppendTerm(b, name, term)
	return append(b, key...)
}

// SplitIndexSortKey splits an IndexSortKey of index name into its term
// (a copy for _bin terms) and key (aliasing sk).
func SplitIndexSortKey(name string, sk []byte) (term, key []byte, err error) {
	if wire.IsIntIndex(name) {
		if len(sk) < 8 {
			return nil, nil, fmt.Errorf("%w: index sort key %x", ErrCorrupt, sk)
		}
		return sk[:8:8], sk[8:], nil
	}
	for i := 0; i+1 < len(sk); i++ {
		if sk[i] != 0 {
			term = append(term, sk[i])
			continue
		}
		switch sk[i+1] {
		case 0xff:
			term = append(term, 0)
			i++
		case 1:
			if term == nil {
				term = []byte{}
			}
			return term, sk[i+2:], nil
		default:
			return nil, nil, fmt.Errorf("%w: index sort key %x", ErrCorrupt, sk)
		}
	}
	return nil, nil, fmt.Errorf("%w: index sort key %x", ErrCorrupt, sk)
}

// Stored values. A value is version(8) | data; when the version's top bit
// is set (versions are log indexes, far below 2^63) metadata follows the
// version: uvarint length, then the object's index terms
// (wire.AppendIndexTerms), then the data. Values without index terms are
// encoded as before indexes existed.
const metaFlag = 1 << 63

// EncodeValueMeta encodes a stored user value with its index terms.
func EncodeValueMeta(version uint64, terms []wire.IndexTerm, data []byte) []byte {
	if len(terms) == 0 {
		return EncodeValue(version, data)
	}
	meta := wire.AppendIndexTerms(nil, terms)
	b := make([]byte, 8, 8+binary.MaxVarintLen64+len(meta)+len(data))
	binary.BigEndian.PutUint64(b, version|metaFlag)
	b = binary.AppendUvarint(b, uint64(len(meta)))
	b = append(b, meta...)
	return append(b, data...)
}

// DecodeValueMeta splits a stored value into version, index terms and data
// (both aliasing b).
func DecodeValueMeta(b []byte) (version uint64, terms []wire.IndexTerm, data []byte, err error) {
	version, meta, data, err := splitValue(b)
	if err != nil || meta == nil {
		return version, nil, data, err
	}
	terms, err = wire.DecodeIndexTerms(meta)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: value metadata: %v", ErrCorrupt, err)
	}
	return version, terms, data, nil
}

func splitValue(b []byte) (version uint64, meta, data []byte, err error) {
	if len(b) < 8 {
		return 0, nil, nil, fmt.Errorf("%w: value of %d bytes", ErrCorrupt, len(b))
	}
	version = binary.BigEndian.Uint64(b)
	if version&metaFlag == 0 {
		return version, nil, b[8:], nil
	}
	n, k := binary.Uvarint(b[8:])
	if k <= 0 || n > uint64(len(b)-8-k) {
		return 0, nil, nil, fmt.Errorf("%w: value metadata", ErrCorrupt)
	}
	rest := b[8+k:]
	return version &^ metaFlag, rest[:n:n], rest[n:], nil
}

// derivedKeys calls f with every derived entry of the object stored under
// user key k (token tok) with index terms terms. The entries' value is the
// token.
func derivedKeys(tok uint64, k []byte, terms []wire.IndexTerm, f func(key []byte)) {
	f(KeyOrderKey(k))
	for _, t := range terms {
		f(IndexKey(t.Name, t.Term, k))
	}
}

// DerivedWrites lists the derived entries to delete and to set when the
// object under user key k (token tok) changes from having the index terms
// old (exists: it existed) to having new (deleted: it no longer exists).
// An entry in both is neither set nor deleted: the key-order entry of an
// overwritten object and a term kept across an overwrite are there
// already, with the same value (the token, which the key alone decides),
// and setting them again would cost a memtable insert and a key to compact
// on every overwrite.
func DerivedWrites(tok uint64, k []byte, old []wire.IndexTerm, existed bool, terms []wire.IndexTerm, deleted bool, del func(key []byte), set func(key, value []byte)) {
	if deleted {
		if existed {
			derivedKeys(tok, k, old, del)
		}
		return
	}
	var v []byte
	if !existed {
		v = tokenValue(tok)
		set(KeyOrderKey(k), v)
	}
	for _, t := range terms {
		if existed && hasTerm(old, t) {
			continue
		}
		if v == nil {
			v = tokenValue(tok)
		}
		set(IndexKey(t.Name, t.Term, k), v)
	}
	if !existed {
		return
	}
	for _, t := range old {
		if !hasTerm(terms, t) {
			del(IndexKey(t.Name, t.Term, k))
		}
	}
}

// hasTerm reports whether terms holds t.
func hasTerm(terms []wire.IndexTerm, t wire.IndexTerm) bool {
	for _, u := range terms {
		if u.Name == t.Name && bytes.Equal(u.Term, t.Term) {
			return true
		}
	}
	return false
}

func tokenValue(tok uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), tok) }

// DerivedToken decodes a derived entry's value.
func DerivedToken(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: derived entry value of %d bytes", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// isDerived reports whether key is a derived entry.
func isDerived(key []byte) bool {
	return len(key) > 0 && (key[0] == prefixKeyOrder || key[0] == prefixIndex)
}
