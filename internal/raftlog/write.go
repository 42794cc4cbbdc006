package raftlog

import (
	"fmt"

	"github.com/cairn-db/cairn/internal/storage"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Hook updates the in-memory view after the batch it was staged in has
// committed. It must be called exactly once, after a successful commit.
type Hook func()

// StageReady stages the durable parts of one Ready into b: the snapshot's
// log position (the caller stages the snapshot's data and applied state),
// the new entries (overwriting any conflicting suffix) and the HardState.
func (l *Log) StageReady(b *storage.Batch, hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot) Hook {
	l.mu.Lock()
	trunc, last, cs := l.mu.trunc, l.mu.last, l.mu.cs
	l.mu.Unlock()

	if !raft.IsEmptySnap(snap) {
		md := snap.Metadata
		start, end := storage.LogKey(l.shard, 0), storage.LogKey(l.shard, ^uint64(0))
		b.DeleteRange(start, end)
		trunc = truncState{md.Index, md.Term}
		b.Set(storage.TruncatedKey(l.shard), trunc.marshal())
		last = md.Index
		cs = md.ConfState
	}
	if len(ents) > 0 {
		first := ents[0].Index
		if first <= trunc.index {
			panic(fmt.Sprintf("raftlog: shard %d append at %d below truncation %d", l.shard, first, trunc.index))
		}
		for i := range ents {
			data, err := ents[i].Marshal()
			if err != nil {
				panic(fmt.Sprintf("raftlog: marshal entry: %v", err))
			}
			b.Set(storage.LogKey(l.shard, ents[i].Index), data)
		}
		newLast := ents[len(ents)-1].Index
		if newLast < last {
			// Entries above newLast conflict with the new leader's log.
			b.DeleteRange(storage.LogKey(l.shard, newLast+1), storage.LogKey(l.shard, last+1))
		}
		last = newLast
	}
	hsSet := !raft.IsEmptyHardState(hs)
	if hsSet {
		data, _ := hs.Marshal()
		b.Set(storage.HardStateKey(l.shard), data)
	}
	return func() {
		l.mu.Lock()
		l.mu.trunc, l.mu.last, l.mu.cs = trunc, last, cs
		if !raft.IsEmptySnap(snap) {
			l.mu.cache.reset()
		}
		l.mu.cache.append(ents)
		l.mu.sinceTrunc += uint64(sizeOf(ents))
		if hsSet {
			l.mu.hs = hs
		}
		l.mu.Unlock()
	}
}

// StageTruncate stages the removal of entries up to and including index
// (which must be applied durably before the batch commits: commit the batch
// with sync, which makes every earlier batch durable too). It returns nil
// when there is nothing to truncate.
func (l *Log) StageTruncate(b *storage.Batch, index uint64) (Hook, error) {
	l.mu.Lock()
	trunc, last := l.mu.trunc, l.mu.last
	l.mu.Unlock()
	if index <= trunc.index || index > last {
		return nil, nil
	}
	term, err := l.Term(index)
	if err != nil {
		return nil, err
	}
	b.DeleteRange(storage.LogKey(l.shard, trunc.index+1), storage.LogKey(l.shard, index+1))
	nt := truncState{index, term}
	b.Set(storage.TruncatedKey(l.shard), nt.marshal())
	return func() {
		l.mu.Lock()
		if nt.index > l.mu.trunc.index {
			l.mu.trunc = nt
			l.mu.cache.truncate(nt.index)
			l.mu.sinceTrunc = 0
		}
		l.mu.Unlock()
	}, nil
}

// Bounds returns the first and last index of the log.
func (l *Log) Bounds() (first, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.trunc.index + 1, l.mu.last
}

// SetConfState records the conf state after an applied conf change.
func (l *Log) SetConfState(cs raftpb.ConfState) {
	l.mu.Lock()
	l.mu.cs = cs
	l.mu.Unlock()
}
