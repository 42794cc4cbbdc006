package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Errors about snapshots.
var (
	// ErrBadSnapshot: snapshot data that does not decode, is out of order
	// or holds keys outside the shard.
	ErrBadSnapshot = errors.New("replica: bad snapshot data")
	// ErrNoSnapshot: the message names no snapshot this replica prepared
	// (it was dropped, replaced or already sent).
	ErrNoSnapshot = errors.New("replica: no such snapshot")
	// ErrSnapshotTooLarge: a received snapshot is over its byte bound.
	ErrSnapshotTooLarge = errors.New("replica: snapshot over its byte bound")
)

// DefaultSnapshotChunk is the size a snapshot source aims for per chunk.
const DefaultSnapshotChunk = 1 << 20

// A snapshot's Data in raft is a small header, never the shard's data:
// magic, kind (outgoing or received) and an id local to this replica.
const (
	snapMagic    = 0xC5
	snapOutgoing = 'o'
	snapReceived = 'r'
)

func snapHeader(kind byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{snapMagic, kind}, id)
}

func parseSnapHeader(b []byte, kind byte) (uint64, bool) {
	if len(b) != 10 || b[0] != snapMagic || b[1] != kind {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[2:]), true
}

// spansOf returns the Pebble key ranges that make up the replicated
// state of the shard d describes, sorted: its descriptor record and dedup
// table (shard-local keys), its data range, then its change history.
func spansOf(d shard.Descriptor) [][2][]byte {
	ds, de := storage.DataSpan(d.Start, d.End)
	q := storage.DedupPrefix(d.ID)
	dk := storage.DescriptorKey(d.ID)
	hs, he := storage.HistorySpan(d.ID)
	sp := [][2][]byte{{dk, storage.PrefixEnd(dk)}, {q, storage.PrefixEnd(q)}, {ds, de}, {hs, he}}
	sort.Slice(sp, func(i, j int) bool { return bytes.Compare(sp[i][0], sp[j][0]) < 0 })
	return sp
}

// maxOutgoing bounds the engine snapshots a replica keeps open for
// snapshots raft asked for and the store has not streamed yet; older ones
// are released (their sends fail and raft asks again).
const (
	maxOutgoing = 4
	outgoingTTL = 10 * time.Minute
)

type outSnap struct {
	snap *storage.Snapshot
	// spans: of the descriptor in snap (a split applied since it was
	// pinned must not narrow what it streams).
	spans   [][2][]byte
	md      raftpb.SnapshotMetadata
	created time.Time
}

// outgoing holds the engine snapshots of snapshots raft asked for, until
// the store's sender takes them.
type outgoing struct {
	mu    sync.Mutex
	next  uint64
	snaps map[uint64]*outSnap
}

func (o *outgoing) add(s *outSnap) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.snaps == nil {
		o.snaps = map[uint64]*outSnap{}
	}
	for id, old := range o.snaps {
		if time.Since(old.created) > outgoingTTL {
			old.snap.Close()
			delete(o.snaps, id)
		}
	}
	for len(o.snaps) >= maxOutgoing {
		oldest := uint64(0)
		for id := range o.snaps {
			if oldest == 0 || id < oldest {
				oldest = id
			}
		}
		o.snaps[oldest].snap.Close()
		delete(o.snaps, oldest)
	}
	o.next++
	o.snaps[o.next] = s
	return o.next
}

func (o *outgoing) take(id uint64) *outSnap {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.snaps[id]
	delete(o.snaps, id)
	return s
}

func (o *outgoing) closeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, s := range o.snaps {
		s.snap.Close()
		delete(o.snaps, id)
	}
}

// snapshot is raft.Storage.Snapshot: raft calls it (under the replica
// lock) when a follower needs a snapshot. It only pins a consistent engine
// snapshot, whose applied state gives the metadata, so the data streamed
// later is exactly the state at that index; the returned Data is a header
// naming the pinned snapshot for OpenSnapshot. Cheap: nothing is read.
func (r *Replica) snapshot() (raftpb.Snapshot, error) {
	s := r.cfg.Engine.NewSnapshot()
	ab, err := s.Get(storage.AppliedKey(r.id))
	var as raftlog.AppliedState
	if err == nil {
		as, err = raftlog.UnmarshalAppliedState(ab)
	}
	if err != nil {
		s.Close()
		r.cfg.Logger.Error("snapshot: applied state", "shard", r.id, "err", err)
		// Raft panics on any other error; this one makes it retry later.
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	d, found, err := loadDescriptor(s, r.id)
	if err != nil || !found {
		s.Close()
		r.cfg.Logger.Error("snapshot: descriptor", "shard", r.id, "found", found, "err", err)
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	md := raftpb.SnapshotMetadata{Index: as.Index, Term: as.Term, ConfState: as.ConfState}
	id := r.peer.out.add(&outSnap{snap: s, spans: spansOf(d), md: md, created: time.Now()})
	return raftpb.Snapshot{Data: snapHeader(snapOutgoing, id), Metadata: md}, nil
}

// SnapshotSource streams the data of one outgoing snapshot in chunks of
// about the configured size, each a run of whole (key, value) records
// (uvarint length-prefixed key, then value). It holds one chunk at a time.
// Not safe for concurrent use; Close it when done.
type SnapshotSource struct {
	snap  *storage.Snapshot
	spans [][2][]byte
	it    *storage.Iter
	chunk int
	md    raftpb.SnapshotMetadata

	chunks, bytes, maxChunk int
}

// OpenSnapshot takes the engine snapshot named by a MsgSnap this replica's
// raft produced and returns its data source. Each MsgSnap can be opened
// once; ErrNoSnapshot if it is unknown or was released. chunk <= 0 means
// DefaultSnapshotChunk.
func (r *Replica) OpenSnapshot(m raftpb.Message, chunk int) (*SnapshotSource, error) {
	if m.Snapshot == nil {
		return nil, ErrNoSnapshot
	}
	id, ok := parseSnapHeader(m.Snapshot.Data, snapOutgoing)
	if !ok {
		return nil, ErrNoSnapshot
	}
	s := r.peer.out.take(id)
	if s == nil {
		return nil, ErrNoSnapshot
	}
	if chunk <= 0 {
		chunk = DefaultSnapshotChunk
	}
	return &SnapshotSource{snap: s.snap, spans: s.spans, chunk: chunk, md: s.md}, nil
}

// Metadata is the snapshot's position and conf state.
func (s *SnapshotSource) Metadata() raftpb.SnapshotMetadata { return s.md }

// Next returns the next chunk, a fresh slice the caller may keep, or
// (nil, io.EOF) after the last one.
func (s *SnapshotSource) Next() ([]byte, error) {
	var buf []byte
	for len(buf) < s.chunk {
		if s.it == nil {
			if len(s.spans) == 0 {
				break
			}
			it, err := s.snap.NewIter(s.spans[0][0], s.spans[0][1])
			if err != nil {
				return nil, err
			}
			s.spans = s.spans[1:]
			if !it.First() {
				if err := it.Close(); err != nil {
					return nil, err
				}
				continue
			}
			s.it = it
		}
		if buf == nil {
			buf = make([]byte, 0, s.chunk+s.chunk/8)
		}
		buf = appendRecord(buf, s.it.Key(), s.it.Value())
		if !s.it.Next() {
			err := s.it.Close()
			s.it = nil
			if err != nil {
				return nil, err
			}
		}
	}
	if len(buf) == 0 {
		return nil, io.EOF
	}
	s.chunks++
	s.bytes += len(buf)
	s.maxChunk = max(s.maxChunk, len(buf))
	return buf, nil
}

// Stats reports the chunks and bytes produced so far and the largest chunk.
func (s *SnapshotSource) Stats() (chunks, bytes, maxChunk int) { return s.chunks, s.bytes, s.maxChunk }

// Close releases the engine snapshot.
func (s *SnapshotSource) Close() {
	if s.it != nil {
		s.it.Close()
		s.it = nil
	}
	if s.snap != nil {
		s.snap.Close()
		s.snap = nil
	}
}

func appendRecord(b, k, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// nextRecord splits the first record off b.
func nextRecord(b []byte) (k, v, rest []byte, err error) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return nil, nil, nil, fmt.Errorf("%w: record key", ErrBadSnapshot)
	}
	k, b = b[l:l+int(n)], b[l+int(n):]
	n, l = binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return nil, nil, nil, fmt.Errorf("%w: record value", ErrBadSnapshot)
	}
	return k, b[l : l+int(n)], b[l+int(n):], nil
}
