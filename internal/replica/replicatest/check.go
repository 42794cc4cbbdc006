package replicatest

import (
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
)

// checkDurable enforces step 2 of the Ready contract at the sender: a
// message that acknowledges or asks for a vote may leave only once the
// state it refers to is durable — what a crash of the sender at this
// instant would leave (its filesystem with every unsynced write dropped):
//
//   - MsgVote: the candidate's term and its vote for itself;
//   - MsgVoteResp granting a vote: the voter's term and vote;
//   - MsgAppResp accepting entries: the log up to the acknowledged index,
//     and the term;
//   - MsgHeartbeatResp, any MsgAppResp: the term.
//
// (A leader's own messages may go before its write; pre-votes persist
// nothing.)
func (e *Env) checkDurable(from *Node, msgs []raftpb.Message) {
	var need bool
	for _, m := range msgs {
		if checked(m) {
			need = true
			break
		}
	}
	if !need {
		return
	}
	d, err := from.durableState()
	if err != nil {
		e.violation("n%d: cannot read its durable state: %v", from.ID, err)
		return
	}
	for _, m := range msgs {
		if !checked(m) {
			continue
		}
		var why []string
		if d.hs.Term < m.Term {
			why = append(why, "durable term "+itoa(d.hs.Term))
		}
		switch {
		case m.Type == raftpb.MsgVote && d.hs.Vote != m.From,
			m.Type == raftpb.MsgVoteResp && !m.Reject && d.hs.Vote != m.To:
			why = append(why, "durable vote "+itoa(d.hs.Vote))
		case m.Type == raftpb.MsgAppResp && !m.Reject && d.last < m.Index:
			why = append(why, "durable log ends at "+itoa(d.last))
		}
		if len(why) > 0 {
			e.violation("n%d sent %s before it was durable (%s)", from.ID, describe(m), strings.Join(why, ", "))
		}
	}
}

func checked(m raftpb.Message) bool {
	switch m.Type {
	case raftpb.MsgVote, raftpb.MsgVoteResp, raftpb.MsgAppResp, raftpb.MsgHeartbeatResp:
		return true
	}
	return false
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
