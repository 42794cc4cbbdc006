package replica

import (
	"encoding/binary"
	"errors"
	"slices"
	"sort"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

type applied struct {
	reqID string
	res   Result
}

// applyLocked applies committed entries in one unsynced batch that also
// records the applied state, then resolves their proposals.
func (r *Replica) applyLocked(ents []raftpb.Entry) {
	b := &applyBatch{b: r.cfg.Engine.NewBatch(), eng: r.cfg.Engine, ov: map[string][]byte{}}
	var results []applied
	for i := range ents {
		e := &ents[i]
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				continue // a new leader's empty entry
			}
			var cmd wire.Command
			if err := cmd.Unmarshal(e.Data); err != nil {
				// Proposers only propose valid encodings; skipping is
				// deterministic on every replica.
				r.cfg.Logger.Error("skipping undecodable entry", "shard", r.id, "index", e.Index, "err", err)
				continue
			}
			res := r.applyCommand(b, e.Index, &cmd)
			results = append(results, applied{reqID: string(cmd.RequestID), res: res})
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := cc.Unmarshal(e.Data); err != nil {
				panic("replica: bad conf change: " + err.Error())
			}
			r.mu.cs = *r.mu.rn.ApplyConfChange(cc)
			r.log.SetConfState(r.mu.cs)
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := cc.Unmarshal(e.Data); err != nil {
				panic("replica: bad conf change: " + err.Error())
			}
			r.mu.cs = *r.mu.rn.ApplyConfChange(cc)
			r.log.SetConfState(r.mu.cs)
		}
	}
	last := ents[len(ents)-1]
	as := raftlog.AppliedState{Index: last.Index, Term: last.Term, ConfState: r.mu.cs}
	b.b.Set(storage.AppliedKey(r.id), as.Marshal())
	if err := b.b.Commit(false); err != nil {
		panic("replica: apply: " + err.Error())
	}
	r.mu.appliedT = last.Term
	r.applied.Store(last.Index)
	if c := r.cfg.LeaderApplied; c != nil && len(results) > 0 && r.leader.Load() == r.cfg.NodeID {
		c.Add(uint64(len(results)))
	}
	for _, a := range results {
		for _, p := range r.mu.props[a.reqID] {
			p.finish(a.res, nil)
		}
		delete(r.mu.props, a.reqID)
	}
}

// applyBatch is the write batch of one apply round plus an overlay of what
// it has written, so reads see the logical state (engine + earlier commands
// of the round) without the cost of an indexed batch.
type applyBatch struct {
	b   *storage.Batch
	eng *storage.Engine
	ov  map[string][]byte // nil value: deleted in this round
}

func (a *applyBatch) Get(k []byte) ([]byte, error) {
	if v, ok := a.ov[string(k)]; ok {
		if v == nil {
			return nil, storage.ErrNotFound
		}
		return v, nil
	}
	return a.eng.Get(k)
}

func (a *applyBatch) Set(k, v []byte) {
	a.b.Set(k, v)
	a.ov[string(k)] = append([]byte{}, v...)
}

func (a *applyBatch) Delete(k []byte) {
	a.b.Delete(k)
	a.ov[string(k)] = nil
}

// pruneEvery: dedup records are pruned when applying a command whose log
// index is a multiple of this, up to pruneMax records at a time — a rule
// on the log, so every replica prunes the same records at the same point.
const (
	pruneEvery = 32
	pruneMax   = 64
)

// applyCommand executes one write deterministically against b.
func (r *Replica) applyCommand(b *applyBatch, index uint64, cmd *wire.Command) Result {
	var dk []byte
	if len(cmd.RequestID) > 0 {
		dk = storage.DedupKey(r.id, cmd.RequestID)
		// The filter rules out (almost) every first attempt without a
		// Pebble read; a possible hit reads the record itself.
		if r.mu.dedup.mayHave(cmd.RequestID) {
			if rec, err := b.Get(dk); err == nil && len(rec) >= 8 {
				var res wire.Result
				if res.Unmarshal(rec[8:]) == nil {
					return Result{Result: res, Index: index}
				}
			}
		}
	}
	key := storage.DataKey(shard.Token(cmd.Key), cmd.Key)
	cur, err := b.Get(key)
	exists := err == nil
	var curVersion uint64
	if exists {
		curVersion, _, _ = storage.DecodeValue(cur)
	} else if !errors.Is(err, storage.ErrNotFound) {
		panic("replica: apply read: " + err.Error())
	}
	res := wire.Result{Status: wire.StatusOK}
	switch {
	case cmd.Cond == wire.CondIfMatch && (!exists || curVersion != cmd.Version):
		res.Status = wire.StatusPreconditionFailed
	case cmd.Cond == wire.CondIfAbsent && exists:
		res.Status = wire.StatusPreconditionFailed
	case cmd.Op == wire.OpPut:
		b.Set(key, storage.EncodeValue(index, cmd.Value))
		res.Version, res.Created = index, !exists
	case cmd.Op == wire.OpDelete && exists:
		b.Delete(key)
		res.Version = curVersion
	default:
		res.Status = wire.StatusNotFound
	}
	if dk != nil {
		rec := binary.BigEndian.AppendUint64(nil, uint64(cmd.UnixNano))
		b.Set(dk, append(rec, res.Marshal()...))
		b.Set(storage.DedupAgeKey(r.id, cmd.UnixNano, cmd.RequestID), []byte{})
		r.mu.dedup.add(cmd.RequestID)
		if index%pruneEvery == 0 {
			r.pruneDedup(b, cmd.UnixNano-int64(r.cfg.DedupTTL))
		}
	}
	return Result{Result: res, Index: index}
}

// pruneDedup removes up to pruneMax dedup records older than before, the
// oldest first, from the logical state (engine merged with the round's
// overlay), so the outcome does not depend on batch boundaries.
func (r *Replica) pruneDedup(b *applyBatch, before int64) {
	p := storage.DedupAgePrefix(r.id)
	limit := storage.DedupAgeKey(r.id, before, nil)
	var cands []string
	it, err := b.eng.NewIter(p, limit)
	if err != nil {
		panic("replica: prune: " + err.Error())
	}
	for ok := it.First(); ok && len(cands) < pruneMax*2; ok = it.Next() {
		if v, in := b.ov[string(it.Key())]; !in || v != nil {
			cands = append(cands, string(it.Key()))
		}
	}
	if err := it.Close(); err != nil {
		panic("replica: prune: " + err.Error())
	}
	for k, v := range b.ov {
		if v != nil && k >= string(p) && k < string(limit) {
			cands = append(cands, k)
		}
	}
	sort.Strings(cands)
	cands = slices.Compact(cands)
	for i, k := range cands {
		if i == pruneMax {
			break
		}
		_, id, err := storage.DecodeDedupAgeKey([]byte(k))
		if err != nil {
			continue
		}
		b.Delete([]byte(k))
		b.Delete(storage.DedupKey(r.id, id))
		r.mu.dedup.remove(id) // an id has one age key and one record
	}
}
