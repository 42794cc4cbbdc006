package wire

import "fmt"

// A scrub entry asks every replica of a shard to hash its data at the
// entry's index (docs/scrub.md). Its data is the first byte scrubV1 and
// the scrub's id. A Cairn from before scrubbing decodes it as a command
// of an unknown version and skips it, as every replica skips an entry
// that does not decode.
const scrubV1 = 6

// MarshalScrub encodes a scrub entry with the given id.
func MarshalScrub(id uint64) []byte {
	w := writer{b: make([]byte, 0, 1+10)}
	w.u8(scrubV1)
	w.u64(id)
	return w.b
}

// ScrubEntry reports whether an entry's data is a scrub entry, and its id.
func ScrubEntry(data []byte) (id uint64, ok bool) {
	if len(data) == 0 || data[0] != scrubV1 {
		return 0, false
	}
	r := reader{b: data[1:]}
	id = r.u64()
	if r.done() != nil {
		return 0, false
	}
	return id, true
}

// ScrubLeaves is the number of token sub-ranges a shard's data hash is
// split into: a mismatch names the sub-ranges that differ.
const ScrubLeaves = 64

// ScrubResult is one replica's hashes of its shard's data at a scrub
// entry: a hash per token sub-range (the leaves) and one of the leaves
// (the root).
type ScrubResult struct {
	ID     uint64 // the scrub entry's id
	Index  uint64 // the scrub entry's log index
	Keys   uint64 // user keys hashed
	Root   uint64
	Leaves []uint64
}

const scrubResultV1 = 1

// Marshal encodes r.
func (r *ScrubResult) Marshal() []byte {
	w := writer{b: make([]byte, 0, 48+10*len(r.Leaves))}
	w.u8(scrubResultV1)
	w.u64(r.ID)
	w.u64(r.Index)
	w.u64(r.Keys)
	w.u64(r.Root)
	w.u64(uint64(len(r.Leaves)))
	for _, l := range r.Leaves {
		w.u64(l)
	}
	return w.b
}

// Unmarshal decodes b into r.
func (r *ScrubResult) Unmarshal(b []byte) error {
	rd := reader{b: b}
	if v := rd.u8(); v != scrubResultV1 && rd.err == nil {
		rd.fail("scrub result version")
	}
	r.ID, r.Index, r.Keys, r.Root = rd.u64(), rd.u64(), rd.u64(), rd.u64()
	n := rd.u64()
	if rd.err == nil && n > 1<<12 {
		rd.fail(fmt.Sprintf("%d scrub leaves", n))
	}
	r.Leaves = nil
	for i := uint64(0); i < n && rd.err == nil; i++ {
		r.Leaves = append(r.Leaves, rd.u64())
	}
	return rd.done()
}
