package replica

import (
	"bytes"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Leader leases: a leader that has just confirmed its leadership with a
// quorum answers linearizable reads for a while without asking again
// (Config.LeaseDuration; docs/architecture.md, "Leader leases").
//
// Why it is safe. Raft here runs with CheckQuorum and PreVote: a follower
// that heard from its leader refuses (pre)votes until an election
// timeout of its own ticks has passed since (raft's inLease rule). A read
// index round that a quorum answered began at time s on the leader's
// clock; each answering follower heard from the leader after s, so none
// of them grants a vote before s + ElectionTick-3 ticks (two ticks whose
// period began before the message can come at once after it — the one
// a stalled ticker loop was handing out and the one its time.Ticker kept
// pending — and the next boundary any time later), and without one of
// them no candidate reaches a quorum. Until then no other leader exists,
// and the leader's commit index covers every acknowledged write. The
// lease ends earlier than that, at s + LeaseDuration, which the store
// sets to 90 % of ElectionTick-3 ticks: room for the clocks of two
// machines to run at rates 10 % apart.
//
// What raft's rule does not cover, handled here:
//   - a leadership transfer: the transferee's vote requests pass the
//     rule. A leader that began a transfer in its term earns and uses no
//     lease for the rest of it (noLeaseTerm, and raft's LeadTransferee);
//   - a restarted follower has forgotten it heard from the leader: a
//     replica that opens with state from a term after bootstrap drops
//     vote requests (other than a transfer's) for its first election
//     timeout (refusesVotesLocked);
//   - a membership change: a quorum of the new configuration need not
//     have answered the round. Applying a configuration ends the lease,
//     and only a round begun after it earns a new one; a joint
//     configuration earns none.
//
// The lease is measured with Config.LeaseClock, Go's monotonic clock: a
// process stopped (SIGSTOP, a VM pause) finds its lease expired when it
// runs again, since that clock kept going.
type leaseState struct {
	until time.Duration // LeaseClock reading the lease ends at
	term  uint64        // the term it was earned in
	epoch uint64        // the configuration epoch it was earned in
	// confEpoch counts configurations applied since the replica opened.
	confEpoch uint64
	// noLeaseTerm: a term in which this replica began a leadership
	// transfer.
	noLeaseTerm uint64
	// restarted: the replica opened with a term after bootstrap (it may
	// have answered a leader before it stopped), and not just created
	// by a split (Config.Created); ticks: ticks it has
	// counted since it opened, up to an election timeout.
	restarted bool
	ticks     int
}

// campaignTransfer is the context raft gives the vote requests of a
// leadership transfer's election (raft.campaignTransfer).
var campaignTransfer = []byte("CampaignTransfer")

// leaseLocked reports whether this replica, leading in its current term,
// holds a lease at now.
func (r *Replica) leaseLocked(st *raft.BasicStatus, now time.Duration) bool {
	l := &r.mu.lease
	return r.cfg.LeaseDuration > 0 && st.RaftState == raft.StateLeader &&
		l.term == st.Term && l.epoch == l.confEpoch && l.noLeaseTerm != st.Term &&
		st.LeadTransferee == raft.None && now < l.until
}

// earnLeaseLocked extends the lease after the round rd, begun in the
// current term and configuration, was answered by a quorum.
func (r *Replica) earnLeaseLocked(rd *readRound) {
	l := &r.mu.lease
	if r.cfg.LeaseDuration <= 0 || rd.epoch != l.confEpoch || len(r.mu.cs.VotersOutgoing) > 0 {
		return
	}
	st := r.mu.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || rd.term != st.Term || l.noLeaseTerm == st.Term {
		return
	}
	until := rd.sent + r.cfg.LeaseDuration
	if l.term != st.Term || l.epoch != l.confEpoch || until > l.until {
		l.until, l.term, l.epoch = until, st.Term, l.confEpoch
	}
}

// noteTransfersLocked ends the lease for the term when msgs (a leader's
// outgoing messages) start a leadership transfer.
func (r *Replica) noteTransfersLocked(msgs []raftpb.Message) {
	for i := range msgs {
		if msgs[i].Type == raftpb.MsgTimeoutNow {
			r.mu.lease.noLeaseTerm = msgs[i].Term
			r.mu.lease.until = 0
		}
	}
}

// leaseReadsLocked serves, under a lease, the reads of this round (at
// the commit index: they wait only for the apply) and the read index
// requests followers forwarded (answered at once, as raft would after a
// quorum round); it returns the forwarded requests it did not answer,
// which raft then takes. Without a lease it does nothing.
func (r *Replica) leaseReadsLocked(rn *raft.RawNode, reads []*waiter, fwd []raftpb.Message) ([]*waiter, []raftpb.Message) {
	if r.cfg.LeaseDuration <= 0 || len(reads) == 0 && len(fwd) == 0 {
		return reads, fwd
	}
	st := rn.BasicStatus()
	now := r.cfg.LeaseClock()
	if !r.leaseLocked(&st, now) {
		return reads, fwd
	}
	for _, w := range reads {
		w.index = st.Commit
		r.mu.applyWait = append(r.mu.applyWait, w)
	}
	if len(reads) > 0 {
		r.resolveReadsLocked()
	}
	kept := fwd[:0]
	var answers []raftpb.Message
	for _, m := range fwd {
		if !isMember(r.mu.cs, m.From) || len(m.Entries) != 1 {
			kept = append(kept, m)
			continue
		}
		answers = append(answers, raftpb.Message{Type: raftpb.MsgReadIndexResp, To: m.From, From: r.cfg.NodeID,
			Term: st.Term, Index: st.Commit, Entries: m.Entries})
	}
	if len(answers) > 0 {
		r.cfg.Send(r.id, answers)
	}
	if c := r.cfg.LeaseReads; c != nil {
		c.Add(uint64(len(reads) + len(answers)))
	}
	// Renew while reads come: a round begun now, once answered, carries
	// the lease on from here.
	if r.mu.lease.until-now < r.cfg.LeaseDuration/2 && !r.roundPendingLocked(st.Term) {
		r.startReadRoundLocked(rn, nil)
	}
	return nil, kept
}

// roundPendingLocked reports whether a read index round of term is
// waiting for its answer.
func (r *Replica) roundPendingLocked(term uint64) bool {
	for _, rd := range r.mu.readBatch {
		if rd.term == term {
			return true
		}
	}
	return false
}

// startReadRoundLocked asks raft for a read index for waiters (none: a
// round that only renews the lease).
func (r *Replica) startReadRoundLocked(rn *raft.RawNode, waiters []*waiter) {
	r.mu.nextRead++
	id := r.mu.nextRead
	r.mu.readBatch[id] = &readRound{waiters: waiters, sent: r.cfg.LeaseClock(),
		term: rn.BasicStatus().Term, epoch: r.mu.lease.confEpoch}
	rn.ReadIndex(readCtx(r.cfg.NodeID, id))
}

// refusesVotesLocked reports whether vote request m is dropped: the
// replica restarted less than an election timeout ago, so it may have
// answered a leader within its lease and forgotten it. It holds when
// this replica or its peers may lease (Config.PeersLease: the store's
// replicas always), and never for the new half of a split
// (Config.Created).
func (r *Replica) refusesVotesLocked(m *raftpb.Message) bool {
	l := &r.mu.lease
	return (r.cfg.LeaseDuration > 0 || r.cfg.PeersLease) && l.restarted && l.ticks < r.cfg.ElectionTick &&
		(m.Type == raftpb.MsgVote || m.Type == raftpb.MsgPreVote) && !bytes.Equal(m.Context, campaignTransfer)
}

// countTicksLocked counts ticks since the replica opened, up to an
// election timeout.
func (r *Replica) countTicksLocked(ticks int) {
	if l := &r.mu.lease; l.ticks < r.cfg.ElectionTick {
		l.ticks = min(l.ticks+ticks, r.cfg.ElectionTick)
	}
}

// holdReadsLocked holds a one-voter leader's reads and forwarded read
// index requests (a learner's) until it has applied an entry of its term,
// and hands back those it held before once it has. Raft answers such a
// leader's read index at once, at its commit index, where a leader of
// several voters waits for the entry of its term to commit first: after
// a restart that kept the log but not the last commit index (a hard state
// whose only change is the commit is written without a sync), that index
// is below writes already acknowledged.
func (r *Replica) holdReadsLocked(rn *raft.RawNode, reads []*waiter, fwd []raftpb.Message) ([]*waiter, []raftpb.Message) {
	held := r.holdingLocked()
	oneVoter := len(r.mu.cs.Voters) == 1 && len(r.mu.cs.VotersOutgoing) == 0
	if !held && (!oneVoter || len(reads) == 0 && len(fwd) == 0) {
		return reads, fwd // nothing to hold or hand back: no status read
	}
	if r.mu.termCommitted == rn.BasicStatus().Term {
		if held {
			reads = append(r.mu.held, reads...)
			fwd = append(r.mu.heldFwd, fwd...)
			r.mu.held, r.mu.heldFwd = nil, nil
		}
		return reads, fwd
	}
	if !oneVoter {
		return reads, fwd
	}
	r.mu.held = append(r.mu.held, reads...)
	r.mu.heldFwd = append(r.mu.heldFwd, fwd...)
	return nil, nil
}

// holdingLocked reports whether holdReadsLocked holds reads.
func (r *Replica) holdingLocked() bool { return len(r.mu.held) > 0 || len(r.mu.heldFwd) > 0 }

// heldReadyLocked reports whether held reads can go on in another round.
func (r *Replica) heldReadyLocked() bool {
	return r.holdingLocked() && r.mu.termCommitted == r.mu.rn.BasicStatus().Term
}
