package replica

import (
	"errors"
	"sort"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"github.com/cespare/xxhash/v2"
	"go.etcd.io/raft/v3/raftpb"
)

type applied struct {
	reqID string
	res   Result
}

// applyLocked applies committed entries in one unsynced batch that also
// records the applied state, then resolves their proposals.
func (r *Replica) applyLocked(ents []raftpb.Entry) {
	b := newApplyBatch(r.cfg.Engine)
	var results []applied
	for i := range ents {
		e := &ents[i]
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				continue // a new leader's empty entry
			}
			cmds, err := wire.SplitEntry(e.Data)
			if err != nil {
				// Proposers only propose valid encodings; skipping is
				// deterministic on every replica.
				r.cfg.Logger.Error("skipping undecodable entry", "shard", r.id, "index", e.Index, "err", err)
				continue
			}
			for _, data := range cmds {
				var cmd wire.Command
				if err := cmd.Unmarshal(data); err != nil {
					r.cfg.Logger.Error("skipping undecodable command", "shard", r.id, "index", e.Index, "err", err)
					continue
				}
				res := r.applyCommand(b, e.Index, &cmd)
				results = append(results, applied{reqID: string(cmd.RequestID), res: res})
			}
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
	b.Set(storage.AppliedKey(r.id), as.Marshal())
	if err := b.commit(); err != nil {
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

// applyBatch holds the writes of one apply round as an overlay on the
// engine, so reads see the logical state (engine + earlier commands of the
// round), and commits them in key order: Pebble inserts a sorted batch
// into its memtable far faster than one whose keys jump between the data
// and the dedup table, as each key's place is found from the previous
// one's.
type applyBatch struct {
	eng *storage.Engine
	ov  map[string][]byte // the round's last write of each key; nil: deleted
	// ranges deleted in this round (before any write in ov).
	ranges [][2]string
	// groups: the dedup groups of the entry being applied (shard, index)
	// by bucket, set into ov when the next entry starts or at commit.
	groups       map[uint64][]byte
	shard, index uint64
}

func newApplyBatch(eng *storage.Engine) *applyBatch {
	return &applyBatch{eng: eng, ov: map[string][]byte{}}
}

func (a *applyBatch) Get(k []byte) ([]byte, error) {
	if v, ok := a.ov[string(k)]; ok {
		if v == nil {
			return nil, storage.ErrNotFound
		}
		return v, nil
	}
	if a.inRange(string(k)) {
		return nil, storage.ErrNotFound
	}
	return a.eng.Get(k)
}

func (a *applyBatch) inRange(k string) bool {
	for _, rg := range a.ranges {
		if k >= rg[0] && k < rg[1] {
			return true
		}
	}
	return false
}

// Set writes k=v; the batch keeps v (the caller must not change it).
func (a *applyBatch) Set(k, v []byte) { a.ov[string(k)] = v }

func (a *applyBatch) Delete(k []byte) { a.ov[string(k)] = nil }

// DeleteRange deletes [start, end) from the engine's view and the round's
// writes so far.
func (a *applyBatch) DeleteRange(start, end []byte) {
	for k := range a.ov {
		if k >= string(start) && k < string(end) {
			a.ov[k] = nil
		}
	}
	a.ranges = append(a.ranges, [2]string{string(start), string(end)})
}

// commit writes the round without fsync: its range deletions, then every
// key's last write in key order. Writes after a range deletion that
// covers them are in ov and so come after it; a key deleted by a range
// needs no point deletion of its own.
func (a *applyBatch) commit() error {
	a.setGroups()
	b := a.eng.NewBatch()
	for _, rg := range a.ranges {
		b.DeleteRange([]byte(rg[0]), []byte(rg[1]))
	}
	keys := make([]string, 0, len(a.ov))
	for k := range a.ov {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := a.ov[k]; {
		case v != nil:
			b.Set([]byte(k), v)
		case !a.inRange(k):
			b.Delete([]byte(k))
		}
	}
	return b.Commit(false)
}

// entry starts the dedup groups of the entry at index of shard, first
// setting those of the previous entry, if it was another.
func (a *applyBatch) entry(shard, index uint64) {
	if a.shard != shard || a.index != index {
		a.setGroups()
		a.shard, a.index = shard, index
	}
}

// setGroups writes the pending dedup groups into the round.
func (a *applyBatch) setGroups() {
	for bucket, g := range a.groups {
		a.Set(storage.DedupKey(a.shard, bucket, a.index), g)
	}
	clear(a.groups)
}

// dropGroupsBelow drops the pending groups of buckets below limit (the
// round's range deletion of those buckets must cover them too).
func (a *applyBatch) dropGroupsBelow(limit uint64) {
	for bucket := range a.groups {
		if bucket < limit {
			delete(a.groups, bucket)
		}
	}
}

// applyCommand executes one write deterministically against b. Its
// version is index, the log index of its entry (an entry holds at most one
// command per key).
func (r *Replica) applyCommand(b *applyBatch, index uint64, cmd *wire.Command) Result {
	var idHash uint64
	if len(cmd.RequestID) > 0 {
		idHash = xxhash.Sum64(cmd.RequestID)
		b.entry(r.id, index)
		// The index rules out every first attempt without a Pebble read
		// (but for a hash shared with another id); a retry reads its
		// group.
		var buf [4]dedupRef
		for _, ref := range r.mu.dedup.candidates(idHash, buf[:0]) {
			var g []byte
			if ref.index == index {
				g = b.groups[ref.bucket]
			} else if v, err := b.Get(storage.DedupKey(r.id, ref.bucket, ref.index)); err == nil {
				g = v
			} else if !errors.Is(err, storage.ErrNotFound) {
				panic("replica: apply read: " + err.Error())
			}
			if rec, ok := findDedupRecord(g, cmd.RequestID); ok {
				var res wire.Result
				if res.Unmarshal(rec) == nil {
					return Result{Result: res, Index: index}
				}
			}
		}
	}
	key := storage.DataKey(shard.Token(cmd.Key), cmd.Key)
	// An unconditional put's outcome does not depend on the key's current
	// state; only whether it created the key does, and only the replica
	// that answers the write (it holds the proposal's waiter) needs to
	// know that. Other replicas skip looking the version up — with a large
	// key space the read is most of the cost of applying a write.
	unconditionalPut := cmd.Op == wire.OpPut && cmd.Cond == wire.CondNone
	answers := unconditionalPut && len(r.mu.props[string(cmd.RequestID)]) > 0
	var curVersion uint64
	looked := !unconditionalPut || answers
	if looked {
		var known bool
		if curVersion, known = r.mu.versions.get(cmd.Key); !known {
			cur, err := b.Get(key)
			switch {
			case err == nil:
				curVersion, _, _ = storage.DecodeValue(cur)
			case !errors.Is(err, storage.ErrNotFound):
				panic("replica: apply read: " + err.Error())
			}
		}
	}
	exists := curVersion != 0
	res := wire.Result{Status: wire.StatusOK}
	created := false
	switch {
	case cmd.Cond == wire.CondIfMatch && (!exists || curVersion != cmd.Version):
		res.Status = wire.StatusPreconditionFailed
	case cmd.Cond == wire.CondIfAbsent && exists:
		res.Status = wire.StatusPreconditionFailed
	case cmd.Op == wire.OpPut:
		b.Set(key, storage.EncodeValue(index, cmd.Value))
		res.Version = index
		created = !exists && (answers || !unconditionalPut)
		// Every replica knows it for a conditional put, so the dedup
		// record (replicated state) holds it; for an unconditional one it
		// is the answer's alone, and a retry answered from the record
		// reports the key as not created.
		res.Created = created && !unconditionalPut
		curVersion = index
	case cmd.Op == wire.OpDelete && exists:
		b.Delete(key)
		res.Version = curVersion
		curVersion = 0
	default:
		res.Status = wire.StatusNotFound
	}
	if looked {
		r.mu.versions.put(cmd.Key, curVersion)
	} else {
		// A replica that did not need the version does not cache it: an
		// entry it holds is kept current, and a missing one costs a
		// Pebble read only where it is needed.
		r.mu.versions.update(cmd.Key, curVersion)
	}
	if len(cmd.RequestID) > 0 {
		bucket := r.dedupBucket(cmd.UnixNano)
		g := appendDedupRecord(b.groups[bucket], cmd.RequestID, res.Marshal())
		if b.groups == nil {
			b.groups = map[uint64][]byte{}
		}
		b.groups[bucket] = g
		r.mu.dedup.add(bucket, idHash, index)
		r.pruneDedup(b, cmd.UnixNano)
	}
	answer := res
	answer.Created = created
	return Result{Result: answer, Index: index}
}

// pruneDedup drops the dedup buckets whose every record is older than
// DedupTTL at proposer time t: the rule depends on the log only, so every
// replica drops the same records at the same command. (A replica that
// restarted repeats a deletion once; that changes nothing.)
func (r *Replica) pruneDedup(b *applyBatch, t int64) {
	limit := r.dedupBucket(t - int64(r.cfg.DedupTTL))
	if limit <= r.mu.dedupFloor {
		return
	}
	b.DeleteRange(storage.DedupBucketStart(r.id, 0), storage.DedupBucketStart(r.id, limit))
	b.dropGroupsBelow(limit)
	r.mu.dedupFloor = limit
	r.mu.dedup.dropBelow(limit)
}
