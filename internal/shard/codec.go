package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadDescriptor is returned for bytes that do not decode into a
// descriptor.
var ErrBadDescriptor = errors.New("shard: malformed descriptor")

const descriptorV1 = 1

// maxMembers bounds the voters plus learners a decoded descriptor may
// list: the bytes come from disk or from a peer.
const maxMembers = 64

// Marshal encodes d (the shard-local descriptor record and the wire form
// of a replica creation request).
func (d Descriptor) Marshal() []byte {
	b := make([]byte, 0, 48+10*(len(d.Replicas)+len(d.Learners)))
	b = append(b, descriptorV1)
	b = binary.AppendUvarint(b, d.ID)
	b = binary.AppendUvarint(b, d.Start)
	b = binary.AppendUvarint(b, d.End)
	b = binary.AppendUvarint(b, d.Epoch)
	for _, ids := range [][]uint64{d.Replicas, d.Learners} {
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			b = binary.AppendUvarint(b, id)
		}
	}
	return b
}

// UnmarshalDescriptor decodes what Marshal produced and checks it: an id,
// at most 64 members, none zero or listed twice.
func UnmarshalDescriptor(b []byte) (Descriptor, error) {
	var d Descriptor
	if len(b) == 0 || b[0] != descriptorV1 {
		return d, fmt.Errorf("%w: version", ErrBadDescriptor)
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var ok [4]bool
	d.ID, ok[0] = next()
	d.Start, ok[1] = next()
	d.End, ok[2] = next()
	d.Epoch, ok[3] = next()
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		return Descriptor{}, fmt.Errorf("%w: header", ErrBadDescriptor)
	}
	seen := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		n, good := next()
		if !good || n > maxMembers {
			return Descriptor{}, fmt.Errorf("%w: member count", ErrBadDescriptor)
		}
		var ids []uint64
		for j := uint64(0); j < n; j++ {
			id, good := next()
			if !good || id == 0 || seen[id] {
				return Descriptor{}, fmt.Errorf("%w: member id", ErrBadDescriptor)
			}
			seen[id] = true
			ids = append(ids, id)
		}
		if i == 0 {
			d.Replicas = ids
		} else {
			d.Learners = ids
		}
	}
	if len(b) != 0 || d.ID == 0 || (d.End != 0 && d.End <= d.Start) {
		return Descriptor{}, fmt.Errorf("%w: trailing bytes or bad range", ErrBadDescriptor)
	}
	return d, nil
}
