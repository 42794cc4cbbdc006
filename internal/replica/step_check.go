package replica

import "go.etcd.io/raft/v3/raftpb"

// admitLocked drops, before raft steps them, the messages of other nodes
// that name log positions this replica cannot have or that only a leader
// may take: etcd raft trusts its peers and panics on some of them (a
// heartbeat whose commit index is beyond the last index: "tocommit(N) is
// out of range [lastIndex(M)]"; a leader transfer request reaching a
// follower) — and, under leader leases, the vote requests a replica that
// restarted less than an election timeout ago refuses (lease.go).
// Messages that need no state to check were checked by the store already
// (sender, type, term bound, entry indexes, conf states).
//
// lo is a lower bound of raft's last index while the messages are stepped
// in order: at the start of a round raft has nothing unstable, so its last
// index is the log's; only a conflicting append or a snapshot can lower it,
// to the append's last entry or the snapshot's index. An honest leader's
// heartbeat carries min(match, commit), and a match is only ever
// acknowledged for entries durable here, so honest messages always pass.
func (r *Replica) admitLocked(msgs []raftpb.Message) []raftpb.Message {
	lo, _ := r.log.LastIndex()
	kept := msgs[:0]
	for i := range msgs {
		m := &msgs[i]
		ok := true
		switch m.Type {
		case raftpb.MsgVote, raftpb.MsgPreVote:
			// A restarted replica keeps the lease of a leader it may
			// have answered before it stopped (lease.go).
			ok = !r.refusesVotesLocked(m)
		case raftpb.MsgHeartbeat:
			ok = m.Commit <= lo
		case raftpb.MsgAppResp:
			// A leader is only acknowledged what it sent. One from a
			// higher term passes: raft then steps down without reading
			// its index.
			ok = m.Reject || m.Index <= lo || m.Term > r.term.Load()
		case raftpb.MsgTransferLeader:
			// Only a leader acts on it. A follower forwards it to its
			// leader, and raft panics sending a forwarded message that
			// has a term ("term should not be set when sending").
			ok = r.leader.Load() == r.cfg.NodeID && m.Term == r.term.Load()
		case raftpb.MsgApp:
			if n := len(m.Entries); n > 0 {
				lo = min(lo, m.Entries[n-1].Index)
			}
		case raftpb.MsgSnap:
			// Only ReceiveSnapshot puts a MsgSnap in the inbox, with the
			// header of data it staged.
			var id uint64
			if m.Snapshot != nil {
				id, ok = parseSnapHeader(m.Snapshot.Data, snapReceived)
			} else {
				ok = false
			}
			if ok {
				r.in.Lock()
				_, ok = r.peer.rcv[id]
				r.in.Unlock()
			}
			if ok {
				lo = min(lo, m.Snapshot.Metadata.Index)
			}
		}
		if !ok {
			r.peer.dropped.Add(1)
			r.cfg.Logger.Debug("dropped message naming an impossible log position", "shard", r.id,
				"type", m.Type, "from", m.From, "term", m.Term, "index", m.Index, "commit", m.Commit, "last", lo)
			continue
		}
		kept = append(kept, *m)
	}
	return kept
}
