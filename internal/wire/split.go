package wire

// A split entry (first byte splitV1) halves a shard's token range in the
// shard's own log (docs/split.md): from its index on, the shard owns
// [Start, Mid) and a new shard, id Child, owns [Mid, End). It names the
// descriptor epoch and range it was decided on; a replica whose applied
// descriptor differs skips it (every replica alike).
const splitV1 = 7

// Split is a decoded split entry.
type Split struct {
	Shard uint64
	// Epoch, Start and End: the parent's descriptor the split was decided
	// on (End 0 = 2^64).
	Epoch, Start, End uint64
	// Mid is the first token of the new shard, whose id is Child.
	Mid, Child uint64
}

// Marshal encodes s as an entry's data.
func (s Split) Marshal() []byte {
	w := writer{b: make([]byte, 0, 1+6*10)}
	w.u8(splitV1)
	for _, v := range []uint64{s.Shard, s.Epoch, s.Start, s.End, s.Mid, s.Child} {
		w.u64(v)
	}
	return w.b
}

// IsSplit reports whether an entry's data is a split entry.
func IsSplit(data []byte) bool { return len(data) > 0 && data[0] == splitV1 }

// DecodeSplit decodes a split entry's data.
func DecodeSplit(data []byte) (Split, error) {
	var s Split
	if !IsSplit(data) {
		return s, ErrMalformed
	}
	r := reader{b: data[1:]}
	for _, p := range []*uint64{&s.Shard, &s.Epoch, &s.Start, &s.End, &s.Mid, &s.Child} {
		*p = r.u64()
	}
	return s, r.done()
}
