package store

import (
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// Why a message from a peer was dropped.
const (
	// DropUnknownShard: the message is for a shard this node holds no
	// replica of.
	DropUnknownShard = iota
	// DropNotReplica: From is not a replica of the shard (per its
	// descriptor), or To is not this node.
	DropNotReplica
	// DropMalformed: a type no peer sends, a term out of bounds, entries
	// out of sequence, a conf change, a bad conf state.
	DropMalformed
	// DropOutOfRange: a forwarded proposal writes a key the shard does
	// not own.
	DropOutOfRange
	// DropImpossible: a heartbeat or acknowledgement naming a log
	// position the replica cannot have (counted by the replicas).
	DropImpossible
	// DropRemoved: the message is for a shard whose local replica was
	// removed by a conf change (a tombstone remains): late messages of
	// the shard never recreate it.
	DropRemoved
	numDrops
)

// DropReasons names the reasons, indexed as above (metric labels).
var DropReasons = [numDrops]string{"unknown_shard", "not_replica", "malformed", "key_out_of_range", "impossible_index", "removed_replica"}

// Bounds on what a message may carry. Terms count elections: 2^48 of them
// are never reached, while a term near 2^64 would overflow. Indexes count
// entries.
const (
	maxTerm  = 1 << 48
	maxIndex = 1 << 62
)

// CheckMessage is the check HandleRaft (viaSnapshot false) and
// HandleSnapshot (viaSnapshot true) apply to a message from a peer before
// its replica sees it: it returns the drop reason (an index of
// DropReasons), or -1 when the message may go on to Replica.Step or
// Replica.ReceiveSnapshot. For harnesses that deliver messages to replicas
// without a Store; safe for concurrent use.
func CheckMessage(d shard.Descriptor, self uint64, m *raftpb.Message, viaSnapshot bool) int {
	return checkMessage(d, self, m, viaSnapshot)
}

// checkMessage checks what needs no raft state: sender and receiver, type,
// terms and indexes, the sequence and kind of entries, a snapshot's conf
// state, the keys of forwarded proposals. It returns the drop reason, or
// -1 when the message may go to the replica (which checks log positions
// under its lock, see replica.admitLocked). viaSnapshot: the message came
// on the snapshot stream — the only way a MsgSnap may arrive.
func checkMessage(d shard.Descriptor, self uint64, m *raftpb.Message, viaSnapshot bool) int {
	if m.To != self || m.From == self || m.From == 0 || !d.HasReplica(m.From) {
		return DropNotReplica
	}
	if m.Term > maxTerm || m.LogTerm > maxTerm || m.Index > maxIndex || m.Commit > maxIndex {
		return DropMalformed
	}
	if viaSnapshot != (m.Type == raftpb.MsgSnap) {
		return DropMalformed
	}
	switch m.Type {
	case raftpb.MsgProp, raftpb.MsgReadIndex:
		// Forwarded by a follower: raft leaves their term unset.
		if m.Term != 0 {
			return DropMalformed
		}
	case raftpb.MsgApp, raftpb.MsgAppResp, raftpb.MsgVote, raftpb.MsgVoteResp, raftpb.MsgPreVote,
		raftpb.MsgPreVoteResp, raftpb.MsgHeartbeat, raftpb.MsgHeartbeatResp, raftpb.MsgReadIndexResp,
		raftpb.MsgTransferLeader, raftpb.MsgTimeoutNow, raftpb.MsgSnap:
		// Raft treats a message without a term as local, skipping its
		// term checks: a peer's always has one.
		if m.Term == 0 {
			return DropMalformed
		}
	default:
		// Local messages (MsgHup, MsgBeat, MsgUnreachable, MsgSnapStatus,
		// storage messages…) never come from a peer.
		return DropMalformed
	}
	switch m.Type {
	case raftpb.MsgProp:
		// Raft panics on an empty proposal.
		if len(m.Entries) == 0 {
			return DropMalformed
		}
		for i := range m.Entries {
			if m.Entries[i].Type != raftpb.EntryNormal {
				return DropMalformed
			}
			if !keysInside(d, m.Entries[i].Data) {
				return DropOutOfRange
			}
		}
	case raftpb.MsgApp:
		if m.LogTerm > m.Term {
			return DropMalformed
		}
		prev := m.LogTerm
		for i := range m.Entries {
			e := &m.Entries[i]
			// Raft panics on an entry that conflicts with a committed one;
			// a leader's entries follow m.Index one by one, their terms
			// never decrease and never pass the leader's.
			if e.Index != m.Index+1+uint64(i) || e.Term < prev || e.Term > m.Term {
				return DropMalformed
			}
			// Cairn makes its membership changes with ConfChangeV2
			// entries only; one that does not decode, or names node 0 or
			// an unknown change type, would panic when applied. (Whether
			// it fits the configuration it will apply to is checked at
			// apply time, by every replica alike.)
			if e.Type != raftpb.EntryNormal && !wellFormedConfChange(e) {
				return DropMalformed
			}
			prev = e.Term
		}
	case raftpb.MsgReadIndex, raftpb.MsgReadIndexResp:
		// Raft reads the request context from the single entry.
		if len(m.Entries) != 1 {
			return DropMalformed
		}
	case raftpb.MsgSnap:
		if m.Snapshot == nil || !validSnapshot(d, self, m) {
			return DropMalformed
		}
	default:
		if len(m.Entries) > 0 {
			return DropMalformed
		}
	}
	return -1
}

// validSnapshot checks a snapshot's position and conf state: raft panics
// installing a conf state it cannot restore.
func validSnapshot(d shard.Descriptor, self uint64, m *raftpb.Message) bool {
	md := m.Snapshot.Metadata
	if md.Index == 0 || md.Index > maxIndex || md.Term == 0 || md.Term > m.Term {
		return false
	}
	cs := md.ConfState
	// A joint configuration (a move in progress) is fine; auto leave
	// only means something in one.
	if cs.AutoLeave && len(cs.VotersOutgoing) == 0 {
		return false
	}
	member := false
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		for _, id := range ids {
			if !d.HasReplica(id) {
				return false
			}
			member = member || id == self
		}
	}
	if !member || len(cs.Voters) == 0 {
		return false
	}
	// Raft restores the conf state and asserts the result is equivalent:
	// a node both voter and learner passes the first and fails the second.
	cfg, prs, err := confchange.Restore(confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: md.Index}, cs)
	if err != nil {
		return false
	}
	got := (&tracker.ProgressTracker{Config: cfg, Progress: prs}).ConfState()
	return cs.Equivalent(got) == nil
}

// keysInside reports whether every command of an entry decodes and writes
// a key of shard d.
func keysInside(d shard.Descriptor, data []byte) bool {
	if len(data) == 0 {
		return true
	}
	if _, ok := wire.ScrubEntry(data); ok {
		return true // writes nothing (a follower's scrub request: scrub.go)
	}
	cmds, err := wire.SplitEntry(data)
	if err != nil {
		return false
	}
	for _, c := range cmds {
		var cmd wire.Command
		if err := cmd.Unmarshal(c); err != nil || !d.Contains(shard.Token(cmd.Key)) {
			return false
		}
	}
	return true
}

// wellFormedConfChange reports whether e is a ConfChangeV2 entry that
// decodes, with a known transition and changes that each add a voter,
// add a learner or remove a node other than 0.
func wellFormedConfChange(e *raftpb.Entry) bool {
	if e.Type != raftpb.EntryConfChangeV2 {
		return false
	}
	var cc raftpb.ConfChangeV2
	if err := cc.Unmarshal(e.Data); err != nil || cc.Transition > raftpb.ConfChangeTransitionJointExplicit {
		return false
	}
	if len(cc.Changes) > maxConfChanges {
		return false
	}
	for _, c := range cc.Changes {
		switch c.Type {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeRemoveNode, raftpb.ConfChangeAddLearnerNode:
		default:
			return false
		}
		if c.NodeID == 0 {
			return false
		}
	}
	// A leave-joint carries no changes and no transition.
	return len(cc.Changes) > 0 || cc.Transition == raftpb.ConfChangeTransitionAuto
}

// maxConfChanges bounds the changes one conf change entry may carry.
const maxConfChanges = 16
