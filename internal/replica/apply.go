package replica

import (
	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// applyLocked applies committed entries (step 3 of the contract): the
// runs of entries between split entries each in one round, a split on its
// own (split.go).
func (r *Replica) applyLocked(ents []raftpb.Entry) {
	for len(ents) > 0 {
		n := len(ents)
		for i := range ents {
			if ents[i].Type == raftpb.EntryNormal && wire.IsSplit(ents[i].Data) {
				n = i
				break
			}
		}
		if n > 0 {
			r.applyRoundLocked(ents[:n])
		}
		if n < len(ents) {
			r.applySplitLocked(&ents[n])
			n++
		}
		ents = ents[n:]
	}
}

// applyRoundLocked applies committed entries through the state machine in
// one unsynced batch that also records the applied state, then resolves
// their proposals.
func (r *Replica) applyRoundLocked(ents []raftpb.Entry) {
	var newDesc *shard.Descriptor
	waiting := func(reqID []byte) bool { return len(r.mu.props[string(reqID)]) > 0 }
	rd := r.sm.Begin(waiting)
	var results []statemachine.Applied
	for i := range ents {
		e := &ents[i]
		switch e.Type {
		case raftpb.EntryNormal:
			if id, ok := wire.ScrubEntry(e.Data); ok {
				// The round ends at the scrub entry, so the engine
				// snapshot taken now holds the data at exactly its index
				// on every replica (docs/scrub.md).
				results = append(results, rd.Applied()...)
				r.commitRoundLocked(rd, *e)
				r.scrubLocked(id, e.Index)
				rd = r.sm.Begin(waiting)
				continue
			}
			r.sm.ApplyEntry(rd, e.Index, e.Term, e.Data)
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := cc.Unmarshal(e.Data); err != nil {
				panic("replica: bad conf change: " + err.Error())
			}
			r.applyConfStateLocked(*r.mu.rn.ApplyConfChange(cc))
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := cc.Unmarshal(e.Data); err != nil {
				panic("replica: bad conf change: " + err.Error())
			}
			if err := checkConfChange(r.mu.cs, e.Index, cc); err != nil {
				// Refused alike by every replica (same entries, same conf
				// state): raft would panic applying it.
				r.cfg.Logger.Warn("conf change skipped", "shard", r.id, "index", e.Index, "err", err)
				continue
			}
			r.applyConfStateLocked(*r.mu.rn.ApplyConfChange(cc))
			// Two conf changes applied in one round (a replica catching
			// up receives a joint change and its leave together) each
			// bump the epoch: the second starts from the first's result.
			cur := r.Desc()
			if newDesc != nil {
				cur = *newDesc
			}
			next := nextDescriptor(cur, r.mu.cs)
			rd.Set(storage.DescriptorKey(r.id), next.Marshal())
			newDesc = &next
			r.cfg.Logger.Info("conf change applied", "shard", r.id, "index", e.Index,
				"epoch", next.Epoch, "voters", next.Replicas, "learners", next.Learners)
		}
	}
	r.commitRoundLocked(rd, ents[len(ents)-1])
	if newDesc != nil {
		r.setDesc(*newDesc)
		r.noteMembershipLocked()
	}
	results = append(results, rd.Applied()...)
	if c := r.cfg.LeaderApplied; c != nil && len(results) > 0 && r.leader.Load() == r.cfg.NodeID {
		c.Add(uint64(len(results)))
	}
	for _, a := range results {
		// A command answers the proposals of its request id and
		// fingerprint; one of another write that reuses the id waits for
		// its own entry (which answers StatusRequestIDReused).
		id := string(a.RequestID)
		ps := r.mu.props[id]
		kept := ps[:0]
		for _, p := range ps {
			if p.fp == a.Fingerprint {
				p.finish(a.Result, nil)
			} else {
				kept = append(kept, p)
			}
		}
		clear(ps[len(kept):])
		if len(kept) == 0 {
			delete(r.mu.props, id)
		} else {
			r.mu.props[id] = kept
		}
	}
}

// commitRoundLocked writes round rd with last as the applied position.
func (r *Replica) commitRoundLocked(rd *statemachine.Round, last raftpb.Entry) {
	as := raftlog.AppliedState{Index: last.Index, Term: last.Term, ConfState: r.mu.cs}
	rd.Set(storage.AppliedKey(r.id), as.Marshal())
	if err := r.sm.Commit(rd); err != nil {
		panic("replica: apply: " + err.Error())
	}
	r.mu.appliedT = last.Term
	r.applied.Store(last.Index)
	r.notifyApplied()
}

// noteMembershipLocked marks the replica leaving or not, and removed,
// once, when its applied conf state no longer lists this node, and tells
// the store.
func (r *Replica) noteMembershipLocked() {
	r.leaving.Store(isLeaving(r.mu.cs, r.cfg.NodeID))
	if len(r.mu.cs.Voters) == 0 || isMember(r.mu.cs, r.cfg.NodeID) || r.removed.Swap(true) {
		return
	}
	r.cfg.Logger.Info("replica removed from its shard", "shard", r.id, "epoch", r.Desc().Epoch)
	if f := r.cfg.OnRemoved; f != nil {
		f(r.Desc())
	}
}

// setConfStateLocked makes cs the replica's configuration (a snapshot's,
// or one just applied), which ends the lease: only a round begun under
// cs earns a new one.
func (r *Replica) setConfStateLocked(cs raftpb.ConfState) {
	r.mu.cs = cs
	r.mu.lease.confEpoch++
	r.mu.lease.until = 0
}

// applyConfStateLocked is setConfStateLocked for a configuration raft
// has just applied; the log's conf state follows it.
func (r *Replica) applyConfStateLocked(cs raftpb.ConfState) {
	r.setConfStateLocked(cs)
	r.log.SetConfState(cs)
}
