package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
)

// errBadSnapshot is returned for snapshot data that does not decode or
// holds keys outside the shard.
var errBadSnapshot = errors.New("replica: bad snapshot data")

// spans returns the Pebble key ranges that make up the shard's replicated
// state: its data range and its dedup tables.
func (r *Replica) spans() [][2][]byte {
	ds, de := storage.DataSpan(r.start, r.end)
	q := storage.DedupPrefix(r.id)
	return [][2][]byte{{ds, de}, {q, storage.PrefixEnd(q)}}
}

// snapshot builds a raft snapshot of the shard's applied state from a
// consistent engine snapshot (raft.Storage.Snapshot). The data is the
// sequence of (key, value) pairs of every span, each length-prefixed.
func (r *Replica) snapshot() (raftpb.Snapshot, error) {
	s := r.cfg.Engine.NewSnapshot()
	defer s.Close()
	ab, err := s.Get(storage.AppliedKey(r.id))
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	as, err := raftlog.UnmarshalAppliedState(ab)
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	var buf bytes.Buffer
	for _, sp := range r.spans() {
		it, err := s.NewIter(sp[0], sp[1])
		if err != nil {
			return raftpb.Snapshot{}, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			writeChunk(&buf, it.Key())
			writeChunk(&buf, it.Value())
		}
		if err := it.Close(); err != nil {
			return raftpb.Snapshot{}, err
		}
	}
	return raftpb.Snapshot{
		Data: buf.Bytes(),
		Metadata: raftpb.SnapshotMetadata{
			Index: as.Index, Term: as.Term, ConfState: as.ConfState,
		},
	}, nil
}

func writeChunk(buf *bytes.Buffer, b []byte) {
	var l [binary.MaxVarintLen64]byte
	buf.Write(l[:binary.PutUvarint(l[:], uint64(len(b)))])
	buf.Write(b)
}

func readChunk(b []byte) (chunk, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errBadSnapshot
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// stageSnapshot replaces the shard's replicated state in b with the
// snapshot's, and records the snapshot position as the applied state.
func (r *Replica) stageSnapshot(b *storage.Batch, snap raftpb.Snapshot) error {
	spans := r.spans()
	for _, sp := range spans {
		b.DeleteRange(sp[0], sp[1])
	}
	data := snap.Data
	for len(data) > 0 {
		var k, v []byte
		var err error
		if k, data, err = readChunk(data); err != nil {
			return err
		}
		if v, data, err = readChunk(data); err != nil {
			return err
		}
		inside := false
		for _, sp := range spans {
			if bytes.Compare(k, sp[0]) >= 0 && bytes.Compare(k, sp[1]) < 0 {
				inside = true
				break
			}
		}
		if !inside {
			return fmt.Errorf("%w: key %x outside shard %d", errBadSnapshot, k, r.id)
		}
		b.Set(k, v)
	}
	md := snap.Metadata
	as := raftlog.AppliedState{Index: md.Index, Term: md.Term, ConfState: md.ConfState}
	b.Set(storage.AppliedKey(r.id), as.Marshal())
	return nil
}
