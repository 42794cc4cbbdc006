package store

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

var quiet = func() *slog.Logger {
	if os.Getenv("CAIRN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}()

type storeHandler struct{ *Store }

func (h storeHandler) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	if resp, ok := h.HandleAdmin(ctx, req); ok {
		return resp
	}
	if req.Kind == wire.KindNodeInfo { // as the coordinator answers it
		info := wire.NodeInfo{Descriptors: h.NodeInfoDescriptors()}
		return &wire.Response{Status: wire.StatusOK, Value: info.Marshal()}
	}
	return &wire.Response{Status: wire.StatusError}
}

type sink struct{ n atomic.Int64 }

func (s *sink) HandleRaft(envs []transport.Envelope) { s.n.Add(int64(len(envs))) }
func (s *sink) HandleRequest(context.Context, *wire.Request) *wire.Response {
	return &wire.Response{Status: wire.StatusError}
}
func (s *sink) HandleSnapshot(context.Context, transport.Envelope, func() ([]byte, error)) error {
	return nil
}

// peerNode is node 1 of a three-node map (every node holds shards 1–3),
// serving its real store on a real gRPC port, and node 2's transport,
// which sends whatever it is given: a forger on the peer port.
func peerNode(t *testing.T) (*Store, *transport.GRPC, *transport.GRPC) {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(Config{NodeID: 1, Engine: eng, Map: m, TickInterval: 10 * time.Millisecond,
		BalanceInterval: -1, SickThreshold: -1, Logger: quiet}, true)
	if err != nil {
		t.Fatal(err)
	}
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	tr1, err := transport.NewGRPC(transport.Config{NodeID: 1, Listener: l1, Peers: peers, Handler: storeHandler{st},
		Unreachable: st.Unreachable, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	forger, err := transport.NewGRPC(transport.Config{NodeID: 2, Listener: l2, Peers: peers, Handler: &sink{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st.SetTransport(tr1)
	st.Start(false)
	t.Cleanup(func() {
		forger.Close()
		tr1.Close()
		st.Stop()
		eng.Close()
	})
	return st, tr1, forger
}

func waitDrops(t *testing.T, st *Store, why int, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st.Dropped()[why] < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s drops: %d, want %d (all: %v)", DropReasons[why], st.Dropped()[why], n, st.Dropped())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One forged heartbeat with a huge commit index, sent to the peer port,
// made etcd raft panic ("tocommit(N) is out of range [lastIndex(M)]") and
// the node exit. It is dropped and counted, and so is every other message
// a peer could forge that raft would choke on or that does not belong to
// this node; the node keeps running.
func TestForgedPeerMessagesAreDroppedAndCounted(t *testing.T) {
	st, _, forger := peerNode(t)
	r := st.Replica(1)
	before := r.Term()
	hb := raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 1 << 40, Commit: 1 << 40}
	forger.Send(1, []transport.Envelope{{ShardID: 1, Msg: hb}})
	waitDrops(t, st, DropImpossible, 1)

	s1, _ := st.cfg.Map.Get(1)
	var outside []byte // a key shard 1 does not own
	for i := 0; ; i++ {
		k := []byte{byte(i), byte(i >> 8)}
		if !s1.Contains(shard.Token(k)) {
			outside = k
			break
		}
	}
	put := func(k []byte) []byte {
		return (&wire.Command{RequestID: []byte("r"), Op: wire.OpPut, Key: k, Value: []byte("v")}).Marshal()
	}
	cc, _ := (&raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode, NodeID: 1}).Marshal()
	ccZero, _ := (&raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode}}}).Marshal()
	ccType, _ := (&raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeUpdateNode, NodeID: 2}}}).Marshal()
	confEntry := func(typ raftpb.EntryType, data []byte) raftpb.Message {
		return raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 6, Index: 5, LogTerm: 5,
			Entries: []raftpb.Entry{{Index: 6, Term: 6, Type: typ, Data: data}}}
	}
	cases := []struct {
		name  string
		shard uint64
		m     raftpb.Message
		why   int
	}{
		{"unknown shard", 99, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 6}, DropUnknownShard},
		{"not a replica", 1, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 9, To: 1, Term: 6}, DropNotReplica},
		{"not to this node", 1, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 3, Term: 6}, DropNotReplica},
		{"from itself", 1, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 1, Term: 6}, DropNotReplica},
		{"term overflow", 1, raftpb.Message{Type: raftpb.MsgVote, From: 2, To: 1, Term: 1<<64 - 1}, DropMalformed},
		{"no term", 1, raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Index: 5, LogTerm: 5}, DropMalformed},
		{"local type", 1, raftpb.Message{Type: raftpb.MsgHup, From: 2, To: 1, Term: 6}, DropMalformed},
		{"snapshot on raft stream", 1, raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 6,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1 << 30, Term: 6,
				ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}, DropMalformed},
		{"entries out of sequence", 1, raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 6, Index: 5, LogTerm: 5,
			Entries: []raftpb.Entry{{Index: 3, Term: 6}}}, DropMalformed},
		// Membership changes travel as ConfChangeV2 entries only; a V1 one
		// or a malformed V2 one is refused.
		{"v1 conf change", 1, confEntry(raftpb.EntryConfChange, cc), DropMalformed},
		{"conf change that does not decode", 1, confEntry(raftpb.EntryConfChangeV2, []byte{0xff, 0xff}), DropMalformed},
		{"conf change naming node 0", 1, confEntry(raftpb.EntryConfChangeV2, ccZero), DropMalformed},
		{"conf change of an unknown type", 1, confEntry(raftpb.EntryConfChangeV2, ccType), DropMalformed},
		{"conf change proposed by a peer", 1, raftpb.Message{Type: raftpb.MsgProp, From: 2, To: 1,
			Entries: []raftpb.Entry{{Type: raftpb.EntryConfChangeV2, Data: ccZero}}}, DropMalformed},
		{"empty proposal", 1, raftpb.Message{Type: raftpb.MsgProp, From: 2, To: 1}, DropMalformed},
		{"read index without context", 1, raftpb.Message{Type: raftpb.MsgReadIndex, From: 2, To: 1}, DropMalformed},
		{"proposal outside the shard", 1, raftpb.Message{Type: raftpb.MsgProp, From: 2, To: 1,
			Entries: []raftpb.Entry{{Data: put(outside)}}}, DropOutOfRange},
		{"ack beyond the log", 1, raftpb.Message{Type: raftpb.MsgAppResp, From: 2, To: 1, Term: raftlog.InitTerm, Index: 1 << 40}, DropImpossible},
	}
	want := st.Dropped()
	for _, c := range cases {
		forger.Send(1, []transport.Envelope{{ShardID: c.shard, Msg: c.m}})
		want[c.why]++
		waitDrops(t, st, c.why, want[c.why])
	}
	if got := st.Dropped(); got != want {
		t.Fatalf("drops %v, want %v", got, want)
	}
	// Still alive, and the forged terms were never adopted.
	if r.Term() != before {
		t.Fatalf("term moved from %d to %d", before, r.Term())
	}
	if first, last := r.LogBounds(); first != raftlog.InitIndex+1 || last != raftlog.InitIndex {
		t.Fatalf("log changed: %d..%d", first, last)
	}
	r.Campaign()
	deadline := time.Now().Add(10 * time.Second)
	for r.Status().RaftState != raft.StatePreCandidate {
		if time.Now().After(deadline) {
			t.Fatal("replica no longer runs")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshotStream opens a snapshot stream to node 1 as node 2 would and
// sends the header and chunks.
func forgedSnapshot(t *testing.T, forger *transport.GRPC, m raftpb.Message, chunks ...[]byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return forger.SendSnapshot(ctx, 1, transport.Envelope{ShardID: 1, Msg: m}, &chunkList{chunks})
}

type chunkList struct{ c [][]byte }

func (l *chunkList) Next() ([]byte, error) {
	if len(l.c) == 0 {
		return nil, io.EOF
	}
	b := l.c[0]
	l.c = l.c[1:]
	return b, nil
}

// A snapshot stream is checked like a raft message before its data is
// read: from a node that is not a replica, or with a conf state raft
// cannot take or that leaves this node out, it is refused and counted,
// and nothing changes.
func TestForgedSnapshotsAreRefused(t *testing.T) {
	st, _, forger := peerNode(t)
	snap := func(from uint64, cs raftpb.ConfState) raftpb.Message {
		return raftpb.Message{Type: raftpb.MsgSnap, From: from, To: 1, Term: 6,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1000, Term: 6, ConfState: cs}}}
	}
	cases := []struct {
		name string
		m    raftpb.Message
		why  int
	}{
		{"not a replica", snap(9, raftpb.ConfState{Voters: []uint64{1, 2, 3}}), DropNotReplica},
		{"without this node", snap(2, raftpb.ConfState{Voters: []uint64{2, 3}}), DropMalformed},
		{"unknown node in the conf state", snap(2, raftpb.ConfState{Voters: []uint64{1, 2, 7}}), DropMalformed},
		{"voter and learner at once", snap(2, raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{2}}), DropMalformed},
		{"auto leave outside a joint configuration", snap(2, raftpb.ConfState{Voters: []uint64{1, 2}, AutoLeave: true}), DropMalformed},
	}
	want := st.Dropped()
	for _, c := range cases {
		if err := forgedSnapshot(t, forger, c.m, []byte{1, 'k', 1, 'v'}); err == nil {
			t.Fatalf("%s: snapshot accepted", c.name)
		}
		want[c.why]++
		if got := st.Dropped(); got != want {
			t.Fatalf("%s: drops %v, want %v", c.name, got, want)
		}
	}
	if a := st.Replica(1).Applied(); a != raftlog.InitIndex {
		t.Fatalf("applied index moved to %d", a)
	}
}
