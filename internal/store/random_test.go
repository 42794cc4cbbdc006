package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/transport"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Message types peers send on the raft stream.
var peerTypes = []raftpb.MessageType{raftpb.MsgApp, raftpb.MsgAppResp, raftpb.MsgVote, raftpb.MsgVoteResp,
	raftpb.MsgPreVote, raftpb.MsgPreVoteResp, raftpb.MsgHeartbeat, raftpb.MsgHeartbeatResp, raftpb.MsgProp,
	raftpb.MsgReadIndex, raftpb.MsgReadIndexResp, raftpb.MsgTransferLeader, raftpb.MsgTimeoutNow}

// Random messages from a peer, near the replica's real state and far from
// it, never crash the node: whatever the store and the replica let
// through, raft takes without panicking.
func TestRandomPeerMessagesNeverCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	st, _, _ := peerNode(t)
	pick := func(small, huge uint64) uint64 {
		if rng.IntN(8) == 0 {
			return huge
		}
		return rng.Uint64N(small)
	}
	for i := 0; i < 5000; i++ {
		typ := peerTypes[rng.IntN(len(peerTypes))]
		if rng.IntN(10) == 0 {
			typ = raftpb.MessageType(rng.IntN(24))
		}
		m := raftpb.Message{
			Type:    typ,
			From:    2 + pick(2, rng.Uint64()),
			To:      1 + pick(1, rng.Uint64()),
			Term:    pick(12, rng.Uint64()),
			LogTerm: pick(12, rng.Uint64()),
			Index:   pick(20, rng.Uint64()),
			Commit:  pick(20, rng.Uint64()),
			Reject:  rng.IntN(2) == 0,
		}
		if typ == raftpb.MsgProp || typ == raftpb.MsgReadIndex {
			m.Term = pick(1, rng.Uint64())
		}
		if m.LogTerm > m.Term && rng.IntN(4) != 0 {
			m.LogTerm = m.Term
		}
		for n := rng.IntN(3); n > 0; n-- {
			e := raftpb.Entry{Term: m.Term, Index: m.Index + uint64(len(m.Entries)) + 1,
				Type: raftpb.EntryType(rng.IntN(3) / 2)}
			if rng.IntN(4) == 0 {
				e.Term = pick(12, rng.Uint64())
			}
			if rng.IntN(4) == 0 {
				e.Index = pick(20, rng.Uint64())
			}
			if rng.IntN(2) == 0 {
				e.Data = make([]byte, rng.IntN(40))
				for j := range e.Data {
					e.Data[j] = byte(rng.Uint32())
				}
			}
			m.Entries = append(m.Entries, e)
		}
		st.HandleRaft([]transport.Envelope{{ShardID: 1 + pick(3, rng.Uint64()), Msg: m}})
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let the workers step them
		}
		if i%500 == 0 {
			st.Replica(1 + uint64(rng.IntN(3))).Campaign()
		}
	}
	r := st.Replica(1)
	r.Campaign()
	deadline := time.Now().Add(10 * time.Second)
	for s := r.Status().RaftState; s == raft.StateFollower; s = r.Status().RaftState {
		if time.Now().After(deadline) {
			t.Fatal("replica no longer runs")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("dropped %v", st.Dropped())
}
