package replica

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Process runs one round of the Ready contract (see doc.go) on its own
// batch. The store's workers use Stage and Finish instead, so one synced
// commit covers the Readies of many shards.
func (r *Replica) Process() {
	b := r.cfg.Engine.NewBatch()
	rr, sync := r.Stage(b)
	if rr == nil {
		b.Close()
		return
	}
	if err := b.Commit(sync); err != nil {
		panic("replica: persist ready: " + err.Error())
	}
	r.Finish(rr)
}

// Round is one Ready between Stage and Finish; the replica stays locked
// in between.
type Round struct {
	rd         raft.Ready
	hook       func()
	hasSnap    bool
	leaderSend bool
	start      time.Time
}

// Stage starts a round: it drains the inbox into raft and, if raft has a
// Ready, stages step 1 of the contract (persist) into b and returns the
// round with the replica locked, and whether b must be synced. Nil: nothing
// to do (the replica is unlocked). The caller commits b, then calls Finish.
// Called by the scheduler, never concurrently for one replica.
func (r *Replica) Stage(b *storage.Batch) (*Round, bool) {
	if r.stopped.Load() {
		return nil, false
	}
	r.mu.Lock()
	if r.stopped.Load() {
		// Stop ran while this round waited for the lock: the store may
		// have deleted the replica's state since, which a round would
		// write back (log, hard state, applied data) under its tombstone.
		r.mu.Unlock()
		return nil, false
	}
	r.settleSnapshotsLocked()
	r.drainLocked()
	if !r.mu.rn.HasReady() {
		r.publishLocked()
		r.mu.Unlock()
		return nil, false
	}
	rd := r.mu.rn.Ready()
	rr := &Round{rd: rd, hasSnap: !raft.IsEmptySnap(rd.Snapshot), start: time.Now()}
	// A leader sends before its own write, so its fsync and the
	// followers' overlap (etcd does the same): an entry still commits only
	// once a majority, possibly without the leader, has it durably.
	rr.leaderSend = r.mu.rn.BasicStatus().RaftState == raft.StateLeader && !rr.hasSnap
	r.noteTransfersLocked(rd.Messages)
	if rr.leaderSend && len(rd.Messages) > 0 {
		r.cfg.Send(r.id, rd.Messages)
	} else if !rr.hasSnap && len(rd.Messages) > 0 {
		rr.rd.Messages = r.sendEarly(rd.Messages)
	}
	// 1. Persist (staged; the caller commits).
	if rr.hasSnap {
		if err := r.stageSnapshot(b, rd.Snapshot, rd.HardState); err != nil {
			panic("replica: bad snapshot: " + err.Error())
		}
	}
	rr.hook = r.log.StageReady(b, rd.HardState, rd.Entries, rd.Snapshot)
	return rr, rd.MustSync || rr.hasSnap
}

// sendEarly sends, before the round's write, the messages of a follower
// that acknowledge nothing of its log or vote — a proposal or a read index
// request on its way to the leader, and a heartbeat's answer (which
// confirms the leader's read index) when its term is durable already — and
// returns the others, which wait until the write is durable. Raft itself
// names only the answers to appends and votes as needing the write first
// (its asynchronous-storage mode sends every other message at once); a
// heartbeat's answer here also waits while its term is not durable yet.
// Without this, a request forwarded by a follower, or a leader's read
// confirmation, waited for the fsync of whatever entries this round (and
// every shard's round persisted in the same batch) happened to hold.
func (r *Replica) sendEarly(msgs []raftpb.Message) (late []raftpb.Message) {
	n := 0
	for i := range msgs {
		if r.early(&msgs[i]) {
			n++
		}
	}
	if n == 0 {
		return msgs
	}
	if n == len(msgs) {
		r.cfg.Send(r.id, msgs)
		return nil
	}
	now := make([]raftpb.Message, 0, n)
	late = make([]raftpb.Message, 0, len(msgs)-n)
	for i := range msgs {
		if r.early(&msgs[i]) {
			now = append(now, msgs[i])
		} else {
			late = append(late, msgs[i])
		}
	}
	r.cfg.Send(r.id, now)
	return late
}

func (r *Replica) early(m *raftpb.Message) bool {
	switch m.Type {
	case raftpb.MsgProp, raftpb.MsgReadIndex:
		return true
	case raftpb.MsgHeartbeatResp:
		return m.Term <= r.mu.durableTerm
	}
	return false
}

// Finish completes a staged round after its batch has committed (steps 2
// to 4 of the contract) and unlocks the replica.
func (r *Replica) Finish(rr *Round) {
	r.finishLocked(rr)
	more := r.mu.rn.HasReady() || r.heldReadyLocked()
	r.publishLocked()
	r.mu.Unlock()
	if more {
		r.cfg.Enqueue(r.id)
	}
}

// stepLocked steps msgs into raft.
func (r *Replica) stepLocked(rn *raft.RawNode, msgs []raftpb.Message) {
	for i := range msgs {
		if err := rn.Step(msgs[i]); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) && !errors.Is(err, raft.ErrStepLocalMsg) {
			r.cfg.Logger.Debug("step", "err", err)
		}
	}
}

// drainLocked feeds the inbox (reports, ticks, messages, proposals, reads)
// into raft.
func (r *Replica) drainLocked() {
	rn := r.mu.rn

	r.in.Lock()
	msgs, props, reads := r.in.msgs, r.in.props, r.in.reads
	ticks, campaign, reports := r.in.ticks, r.in.campaign, r.in.reports
	r.in.msgs, r.in.props, r.in.reads, r.in.reports = nil, nil, nil, nil
	r.in.ticks, r.in.campaign = 0, false
	r.in.Unlock()
	msgs = r.admitLocked(msgs)

	for _, f := range reports {
		f(rn)
	}
	before := r.leader.Load() // as the last round left it
	r.countTicksLocked(ticks)
	var fwd []raftpb.Message // followers' read index requests, for the lease
	if before == r.cfg.NodeID && r.cfg.LeaseDuration > 0 {
		msgs, fwd = splitReadIndex(msgs, r.cfg.NodeID)
	}
	if before == r.cfg.NodeID {
		// A leader whose round stalled (a slow sync, a starved process)
		// finds its followers' answers, which came in meanwhile, beside
		// the ticks that piled up: it steps the answers first, and at
		// most one election timeout's ticks less one, so that its quorum
		// check (every election timeout, with CheckQuorum) sees the
		// followers it heard from. Ticks first, or more of them, and a
		// check would find no follower heard since the last one: the
		// leader would step down over a stall its followers never saw.
		r.stepLocked(rn, msgs)
		msgs = nil
		ticks = min(ticks, r.cfg.ElectionTick-1)
	}
	for i := 0; i < ticks; i++ {
		rn.Tick()
	}
	if campaign {
		_ = rn.Campaign()
	}
	r.stepLocked(rn, msgs)
	r.publishLocked()
	lead := r.leader.Load()
	if lead == 0 && ticks > 0 && r.mu.hadLeader {
		// A round that began with a leader lost it at its last tick at
		// the earliest: the ticks that piled up before (a slow round)
		// were not without a leader.
		lost := ticks
		if before != 0 {
			lost = 1
		}
		r.mu.leaderless += lost
		if r.mu.leaderless >= r.cfg.ElectionTick && !r.LeaderLost() {
			close(*r.lostCh.Load())
		}
	}
	isLeader := lead == r.cfg.NodeID
	r.proposeLocked(props, lead)
	if isLeader {
		r.maybeStampLocked()
	}
	if !isLeader {
		// Only forwarded reads go on, to the leader, while it is known.
		kept := reads[:0]
		for _, w := range reads {
			if w.forward && lead != 0 {
				kept = append(kept, w)
			} else {
				w.finish(&NotLeaderError{Leader: lead})
			}
		}
		reads = kept
	}
	if isLeader {
		reads, fwd = r.holdReadsLocked(rn, reads, fwd)
		reads, fwd = r.leaseReadsLocked(rn, reads, fwd)
	}
	r.stepLocked(rn, fwd)
	if len(reads) > 0 {
		r.startReadRoundLocked(rn, reads)
	}
	if ticks > 0 && lead != 0 {
		r.resendReadsLocked(rn, ticks)
	}
}

// readRetryTicks is how many ticks a read index request goes unanswered
// before it is asked again (half a second at the store's 100 ms tick).
// Raft does not retransmit a follower's MsgReadIndex (nor the leader's
// answer), and the transport drops messages to a peer whose queue is
// full: without asking again, a forwarded read whose request was lost
// waited for its caller's bound (seconds) although the leader was there
// all along. (etcd's server asks again after the same half second.)
const readRetryTicks = 5

// readRound is one read index request and the reads waiting for it.
type readRound struct {
	waiters []*waiter
	ticks   int // ticks since it was last asked
	// sent: the LeaseClock reading when it was first asked; term and
	// epoch: the term and configuration then (a leader's answered round
	// earns it a lease from sent: lease.go).
	sent        time.Duration
	term, epoch uint64
}

// splitReadIndex takes the read index requests of other nodes out of
// msgs.
func splitReadIndex(msgs []raftpb.Message, self uint64) (rest, fwd []raftpb.Message) {
	n := 0
	for i := range msgs {
		if msgs[i].Type == raftpb.MsgReadIndex && msgs[i].From != self {
			n++
		}
	}
	if n == 0 {
		return msgs, nil
	}
	for i := range msgs {
		if msgs[i].Type == raftpb.MsgReadIndex && msgs[i].From != self {
			fwd = append(fwd, msgs[i])
		} else {
			rest = append(rest, msgs[i])
		}
	}
	return rest, fwd
}

// resendReadsLocked counts ticks ticks against every round waiting for
// its read index and asks again for those unanswered for readRetryTicks.
// Whichever answer comes first serves the round's reads: each request
// went out after they arrived, so its index is one a linearizable read
// may use. The leader ignores a request whose context it still has
// pending.
func (r *Replica) resendReadsLocked(rn *raft.RawNode, ticks int) {
	for id, rd := range r.mu.readBatch {
		if rd.ticks += ticks; rd.ticks >= readRetryTicks {
			rd.ticks = 0
			rn.ReadIndex(readCtx(r.cfg.NodeID, id))
		}
	}
}

// Batching: the proposals of one round go into as few entries as
// possible, each at most maxBatchCmds commands or maxBatchBytes, and never
// two commands on the same key (a command's version is its entry's index).
const (
	maxBatchCmds  = 256
	maxBatchBytes = 256 << 10
)

// proposeLocked hands the round's proposals to raft, batched into entries.
func (r *Replica) proposeLocked(props []*proposal, lead uint64) {
	isLeader := lead == r.cfg.NodeID
	var (
		batch []*proposal
		cmds  [][]byte
		size  int
		keys  = map[string]struct{}{}
	)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		data := cmds[0]
		switch {
		case isLeader:
			// A leader stamps its entries with its clock: that moves the
			// shard clock (see internal/statemachine).
			now := r.cfg.Clock()
			data = wire.MarshalStamped(uint64(now), cmds)
			r.mu.lastStamp = now
		case len(cmds) > 1:
			data = wire.MarshalBatch(cmds)
		}
		if err := r.mu.rn.Propose(data); err != nil {
			// Dropped: a leadership transfer is under way (or the
			// uncommitted log is over its bound). The coordinator retries
			// until the new leader takes it or the deadline passes.
			for _, p := range batch {
				p.finish(Result{}, &NotLeaderError{Leader: lead})
			}
		} else {
			// A follower's proposals went to the leader in this round's
			// messages; each resolves when this replica applies it.
			for _, p := range batch {
				r.mu.props[p.reqID] = append(r.mu.props[p.reqID], p)
			}
		}
		batch, cmds, size = batch[:0], cmds[:0], 0
		clear(keys)
	}
	for _, p := range props {
		if p.abandoned.Load() {
			continue
		}
		if !isLeader && (!p.forward || lead == 0) {
			p.finish(Result{}, &NotLeaderError{Leader: lead})
			continue
		}
		_, dup := keys[string(p.key)]
		if dup || len(batch) == maxBatchCmds || len(batch) > 0 && size+len(p.data) > maxBatchBytes {
			flush()
		}
		batch = append(batch, p)
		cmds = append(cmds, p.data)
		size += len(p.data)
		keys[string(p.key)] = struct{}{}
	}
	flush()
}

// maybeStampLocked has a leader propose an entry that only stamps the
// shard clock when it stamped none for statemachine.StampInterval and the
// dedup table holds records that wait to expire — its own writes stamp the
// clock, but writes its followers forward do not — or when StampClock
// asked for one.
func (r *Replica) maybeStampLocked() {
	now := r.cfg.Clock()
	asked := r.stampAsked.Swap(false) && r.IsLeader()
	if !asked && (now-r.mu.lastStamp < statemachine.StampInterval(r.cfg.DedupTTL) || !r.sm.HasRecords()) {
		return
	}
	if err := r.mu.rn.Propose(wire.MarshalStamped(uint64(now), nil)); err == nil {
		r.mu.lastStamp = now
	}
}

// publishLocked updates the atomics and fails every waiter when the
// leader or the term changed: a proposal or read made under the old leader
// may be lost, and the coordinator retries it (under the same request id,
// so a write that did commit applies once).
func (r *Replica) publishLocked() {
	st := r.mu.rn.BasicStatus()
	r.leader.Store(st.Lead)
	r.term.Store(st.Term)
	if st.Lead != 0 && (r.mu.leaderless != 0 || !r.mu.hadLeader) {
		r.mu.hadLeader = true
		r.mu.leaderless = 0
		if r.LeaderLost() {
			ch := make(chan struct{})
			r.lostCh.Store(&ch)
		}
	}
	if st.Lead != r.mu.seenLead || st.Term != r.mu.seenTerm {
		r.mu.seenLead, r.mu.seenTerm = st.Lead, st.Term
		r.failAllLocked(&NotLeaderError{Leader: st.Lead})
	}
	r.resolveReplicatedLocked()
}

func (r *Replica) finishLocked(rr *Round) {
	rd := rr.rd
	hasSnap := rr.hasSnap
	rr.hook()
	if !raft.IsEmptyHardState(rd.HardState) {
		r.mu.durableTerm = rd.HardState.Term
	}
	if hasSnap {
		md := rd.Snapshot.Metadata
		r.mu.appliedT = md.Term
		r.setConfStateLocked(md.ConfState)
		r.applied.Store(md.Index)
		if err := r.sm.Reset(); err != nil {
			panic("replica: state machine after snapshot: " + err.Error())
		}
		if err := r.sm.OpenHistory(md.Index); err != nil {
			panic("replica: history after snapshot: " + err.Error())
		}
		r.notifyApplied()
		// The snapshot carried the descriptor of its conf state.
		d, found, err := loadDescriptor(r.cfg.Engine, r.id)
		if err != nil {
			panic("replica: descriptor after snapshot: " + err.Error())
		}
		if !found {
			d = nextDescriptor(r.Desc(), md.ConfState)
		}
		r.setDesc(d)
		r.noteMembershipLocked()
		r.cfg.Logger.Info("applied snapshot", "shard", r.id, "index", md.Index, "bytes", len(rd.Snapshot.Data))
	}

	// 2. Send (followers and candidates: only now that the state their
	// messages acknowledge is durable).
	if !rr.leaderSend && len(rd.Messages) > 0 {
		r.cfg.Send(r.id, rd.Messages)
	}

	// 3. Apply.
	if n := len(rd.CommittedEntries); n > 0 {
		r.applyLocked(rd.CommittedEntries)
		if st := r.mu.rn.BasicStatus(); st.RaftState == raft.StateLeader && rd.CommittedEntries[n-1].Term == st.Term {
			r.mu.termCommitted = st.Term
		}
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 16 || binary.BigEndian.Uint64(rs.RequestCtx) != r.cfg.NodeID {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx[8:])
		if rd := r.mu.readBatch[id]; rd != nil {
			r.earnLeaseLocked(rd)
			for _, w := range rd.waiters {
				w.index = rs.Index
				r.mu.applyWait = append(r.mu.applyWait, w)
			}
			delete(r.mu.readBatch, id)
		}
	}
	r.resolveReadsLocked()

	// 4. Advance.
	r.mu.rn.Advance(rd)
	r.maybeTruncateLocked()
	r.observeReady(time.Since(rr.start))
}

func (r *Replica) resolveReadsLocked() {
	applied := r.applied.Load()
	kept := r.mu.applyWait[:0]
	for _, w := range r.mu.applyWait {
		if w.index <= applied {
			w.finish(nil)
		} else {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(r.mu.applyWait); i++ {
		r.mu.applyWait[i] = nil
	}
	r.mu.applyWait = kept
}

// maybeTruncateLocked drops applied log entries once more than
// TruncateThreshold entries or TruncateBytes bytes have piled up, keeping
// TruncateKeep entries below the applied index — and, on a leader,
// everything a follower still lacks (one that is down included, or one
// whose progress a new leader does not know yet: a node restarted after a
// crash then catches up from the log instead of a snapshot of the whole
// shard) up to waitFollowerBytes of log, and everything after the index of
// a snapshot being sent (or just installed) up to waitSnapshotBytes. The
// truncation batch is synced, which makes every earlier (unsynced) apply
// batch durable first, so entries are only removed once applied durably.
func (r *Replica) maybeTruncateLocked() {
	first, _ := r.log.Bounds()
	applied := r.applied.Load()
	since := r.log.BytesSinceTruncation()
	if applied < first || applied-first+1 <= r.cfg.TruncateThreshold && since < r.cfg.TruncateBytes {
		return
	}
	if applied <= r.cfg.TruncateKeep {
		return
	}
	upTo := applied - r.cfg.TruncateKeep
	if r.leader.Load() == r.cfg.NodeID {
		upTo = r.heldForFollowersLocked(first, upTo, since)
	}
	if upTo < first {
		return
	}
	b := r.cfg.Engine.NewBatch()
	hook, err := r.log.StageTruncate(b, upTo)
	if err != nil || hook == nil {
		b.Close()
		return
	}
	if err := b.Commit(true); err != nil {
		panic("replica: truncate: " + err.Error())
	}
	hook()
}

// A leader holds its log back for a follower that lacks entries until
// waitFollowerBytes times TruncateBytes have piled up since the last
// truncation; for one being sent a snapshot, until waitSnapshotBytes
// times. A snapshot stream is active and bounded in time, and the log
// written while it runs is what the follower continues with: cut it and
// the follower needs a second snapshot of the whole shard, which under
// steady writes can repeat without end (a move that never finishes).
const (
	waitFollowerBytes = 64
	waitSnapshotBytes = 1024
)

// heldForFollowersLocked lowers upTo, the leader's truncation point, to
// keep what its followers still need (see maybeTruncateLocked).
func (r *Replica) heldForFollowersLocked(first, upTo, since uint64) uint64 {
	r.mu.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == r.cfg.NodeID {
			return
		}
		// A follower being sent a snapshot (a learner a move adds)
		// continues from the snapshot's index; so does one whose
		// snapshot was reported sent, until the leader hears it has the
		// entries after it.
		from := pr.PendingSnapshot
		if pr.State != tracker.StateSnapshot {
			from = r.mu.snapDone[id]
			if from != 0 && (pr.Match >= from || from+1 < first) {
				delete(r.mu.snapDone, id)
				from = 0
			}
		}
		// It lacks the entries after from: they stay while the first of
		// them is still in the log.
		if since < waitSnapshotBytes*r.cfg.TruncateBytes && from > 0 && from+1 >= first && from < upTo {
			upTo = from
		}
		if since >= waitFollowerBytes*r.cfg.TruncateBytes {
			return
		}
		// With CutPastDown only active followers whose progress is
		// known hold the log back (a snapshot being sent still does).
		wait := !r.cfg.CutPastDown || pr.RecentActive && pr.Match > 0
		if wait && pr.Match+1 >= first && pr.Match < upTo {
			upTo = pr.Match
		}
		// A follower whose progress this leader has not learnt since it
		// was elected (Match 0: down, or still being probed after a
		// restart) may need any entry: none is cut until the bound.
		if wait && pr.Match == 0 && pr.State != tracker.StateSnapshot {
			upTo = min(upTo, first-1)
		}
	})
	return upTo
}
