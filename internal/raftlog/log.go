package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Initial index and term of a bootstrapped shard: every replica starts from
// the same empty "snapshot" at this position, so no bootstrap entries are
// needed and all replicas agree on the conf state from the first tick.
const (
	InitIndex = 5
	InitTerm  = 5
)

// AppliedState is the durable position of the state machine.
type AppliedState struct {
	Index     uint64
	Term      uint64
	ConfState raftpb.ConfState
}

// Marshal encodes the applied state.
func (a AppliedState) Marshal() []byte {
	cs, err := a.ConfState.Marshal()
	if err != nil {
		panic(fmt.Sprintf("raftlog: marshal conf state: %v", err))
	}
	b := make([]byte, 16, 16+len(cs))
	binary.BigEndian.PutUint64(b, a.Index)
	binary.BigEndian.PutUint64(b[8:], a.Term)
	return append(b, cs...)
}

// UnmarshalAppliedState decodes an applied state.
func UnmarshalAppliedState(b []byte) (AppliedState, error) {
	var a AppliedState
	if len(b) < 16 {
		return a, fmt.Errorf("%w: applied state", storage.ErrCorrupt)
	}
	a.Index = binary.BigEndian.Uint64(b)
	a.Term = binary.BigEndian.Uint64(b[8:])
	if err := a.ConfState.Unmarshal(b[16:]); err != nil {
		return a, fmt.Errorf("%w: conf state: %v", storage.ErrCorrupt, err)
	}
	return a, nil
}

type truncState struct{ index, term uint64 }

// MarshalTruncated encodes the truncated state stored under
// storage.TruncatedKey (a snapshot installed by ingestion writes it).
func MarshalTruncated(index, term uint64) []byte { return truncState{index, term}.marshal() }

func (t truncState) marshal() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, t.index)
	binary.BigEndian.PutUint64(b[8:], t.term)
	return b
}

// SnapshotFunc builds the data of a snapshot of the shard: it is called by
// Log.Snapshot and must return data consistent with the returned metadata.
type SnapshotFunc func() (raftpb.Snapshot, error)

// Log is raft.Storage for one shard replica.
type Log struct {
	eng   *storage.Engine
	shard uint64
	snap  SnapshotFunc

	mu struct {
		sync.Mutex
		hs    raftpb.HardState
		trunc truncState
		last  uint64
		cs    raftpb.ConfState
		cache entryCache
		// sinceTrunc: bytes of entries appended since the last truncation
		// (or since the log was opened).
		sinceTrunc uint64
	}
}

// BytesSinceTruncation is how many bytes of entries were appended since
// the log was last truncated (or opened): the replica truncates by it.
func (l *Log) BytesSinceTruncation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.sinceTrunc
}

var _ raft.Storage = (*Log)(nil)

// Exists reports whether the engine holds state for shard.
func Exists(eng *storage.Engine, shard uint64) (bool, error) {
	_, err := eng.Get(storage.TruncatedKey(shard))
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Bootstrap writes the initial state of a new shard with the given voters.
func Bootstrap(eng *storage.Engine, shard uint64, voters []uint64) error {
	b := eng.NewBatch()
	b.Set(storage.TruncatedKey(shard), truncState{InitIndex, InitTerm}.marshal())
	hs := raftpb.HardState{Term: InitTerm, Commit: InitIndex}
	hsb, _ := hs.Marshal()
	b.Set(storage.HardStateKey(shard), hsb)
	as := AppliedState{Index: InitIndex, Term: InitTerm, ConfState: raftpb.ConfState{Voters: voters}}
	b.Set(storage.AppliedKey(shard), as.Marshal())
	return b.Commit(true)
}

// Open loads the shard's log state from the engine.
func Open(eng *storage.Engine, shard uint64, snap SnapshotFunc) (*Log, AppliedState, error) {
	l := &Log{eng: eng, shard: shard, snap: snap}
	tb, err := eng.Get(storage.TruncatedKey(shard))
	if err != nil {
		return nil, AppliedState{}, fmt.Errorf("raftlog: shard %d truncated state: %w", shard, err)
	}
	if len(tb) != 16 {
		return nil, AppliedState{}, fmt.Errorf("%w: truncated state", storage.ErrCorrupt)
	}
	l.mu.trunc = truncState{binary.BigEndian.Uint64(tb), binary.BigEndian.Uint64(tb[8:])}
	hsb, err := eng.Get(storage.HardStateKey(shard))
	if err != nil {
		return nil, AppliedState{}, fmt.Errorf("raftlog: shard %d hard state: %w", shard, err)
	}
	if err := l.mu.hs.Unmarshal(hsb); err != nil {
		return nil, AppliedState{}, fmt.Errorf("%w: hard state: %v", storage.ErrCorrupt, err)
	}
	ab, err := eng.Get(storage.AppliedKey(shard))
	if err != nil {
		return nil, AppliedState{}, fmt.Errorf("raftlog: shard %d applied state: %w", shard, err)
	}
	as, err := UnmarshalAppliedState(ab)
	if err != nil {
		return nil, AppliedState{}, err
	}
	l.mu.cs = as.ConfState
	// The last index is the highest log key, or the truncation point.
	l.mu.last = l.mu.trunc.index
	it, err := eng.NewIter(storage.LogKey(shard, 0), storage.LogKey(shard, ^uint64(0)))
	if err != nil {
		return nil, AppliedState{}, err
	}
	if it.Last() {
		idx, err := storage.LogIndex(it.Key())
		if err != nil {
			it.Close()
			return nil, AppliedState{}, err
		}
		l.mu.last = idx
	}
	if err := it.Close(); err != nil {
		return nil, AppliedState{}, err
	}
	return l, as, nil
}

// InitialState implements raft.Storage.
func (l *Log) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.hs, l.mu.cs, nil
}

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.trunc.index + 1, nil
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.last, nil
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	trunc, last := l.mu.trunc, l.mu.last
	t, cached := l.mu.cache.term(i)
	l.mu.Unlock()
	switch {
	case cached:
		return t, nil
	case i == trunc.index:
		return trunc.term, nil
	case i < trunc.index:
		return 0, raft.ErrCompacted
	case i > last:
		return 0, raft.ErrUnavailable
	}
	e, err := l.entry(i)
	if err != nil {
		return 0, err
	}
	return e.Term, nil
}

func (l *Log) entry(i uint64) (raftpb.Entry, error) {
	var e raftpb.Entry
	b, err := l.eng.Get(storage.LogKey(l.shard, i))
	if errors.Is(err, storage.ErrNotFound) {
		// Truncated concurrently.
		return e, raft.ErrCompacted
	}
	if err != nil {
		return e, err
	}
	if err := e.Unmarshal(b); err != nil {
		return e, fmt.Errorf("%w: entry %d: %v", storage.ErrCorrupt, i, err)
	}
	return e, nil
}

// Entries implements raft.Storage: entries [lo, hi) up to maxSize bytes
// (at least one entry).
func (l *Log) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	l.mu.Lock()
	trunc, last := l.mu.trunc, l.mu.last
	cached, ok := l.mu.cache.get(lo, hi)
	l.mu.Unlock()
	if lo <= trunc.index {
		return nil, raft.ErrCompacted
	}
	if hi > last+1 {
		return nil, raft.ErrUnavailable
	}
	if ok {
		return limitSize(cached, maxSize), nil
	}
	it, err := l.eng.NewIter(storage.LogKey(l.shard, lo), storage.LogKey(l.shard, hi))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []raftpb.Entry
	var size uint64
	next := lo
	for ok := it.First(); ok; ok = it.Next() {
		var e raftpb.Entry
		if err := e.Unmarshal(it.Value()); err != nil {
			return nil, fmt.Errorf("%w: entry: %v", storage.ErrCorrupt, err)
		}
		if e.Index != next {
			// A concurrent truncation removed the start: report compaction.
			return nil, raft.ErrCompacted
		}
		size += uint64(e.Size())
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		next++
	}
	if len(out) == 0 {
		return nil, raft.ErrCompacted
	}
	return out, nil
}

// limitSize keeps the longest prefix of ents within maxSize bytes (at
// least one entry).
func limitSize(ents []raftpb.Entry, maxSize uint64) []raftpb.Entry {
	size := uint64(ents[0].Size())
	for n := 1; n < len(ents); n++ {
		size += uint64(ents[n].Size())
		if size > maxSize {
			return ents[:n:n]
		}
	}
	return ents
}

// Snapshot implements raft.Storage by delegating to the replica.
func (l *Log) Snapshot() (raftpb.Snapshot, error) {
	if l.snap == nil {
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	return l.snap()
}

// CreateEmpty writes the state of a replica that holds nothing yet: no
// log, no HardState, an empty conf state. It is a member of no
// configuration and never campaigns; the leader that added it sends it a
// snapshot (the leader's log starts after InitIndex, so it has no entries
// to append from the beginning).
func CreateEmpty(eng *storage.Engine, shard uint64, extra func(b *storage.Batch)) error {
	b := eng.NewBatch()
	b.Set(storage.TruncatedKey(shard), truncState{}.marshal())
	hsb, _ := (&raftpb.HardState{}).Marshal()
	b.Set(storage.HardStateKey(shard), hsb)
	b.Set(storage.AppliedKey(shard), AppliedState{}.Marshal())
	if extra != nil {
		extra(b)
	}
	return b.Commit(true)
}

// StageSplitChild adds to b the initial state of a shard a split creates
// on this node: its log starts empty after index (the split entry's index
// in the parent's log) at term, committed and applied there, with the
// parent's conf state. Every replica of the parent writes the same state
// when it applies the split, so the new shard's group starts from one
// agreed position and elects its leader among the same members.
func StageSplitChild(b *storage.Batch, shard, index, term uint64, cs raftpb.ConfState) {
	b.DeleteRange(storage.LogKey(shard, 0), storage.LogKey(shard, ^uint64(0)))
	b.Set(storage.TruncatedKey(shard), truncState{index, term}.marshal())
	hs := raftpb.HardState{Term: term, Commit: index}
	hsb, _ := hs.Marshal()
	b.Set(storage.HardStateKey(shard), hsb)
	b.Set(storage.AppliedKey(shard), AppliedState{Index: index, Term: term, ConfState: cs}.Marshal())
}
