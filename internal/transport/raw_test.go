package transport

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"go.etcd.io/raft/v3/raftpb"
)

// rawFrame is a raft stream frame holding b.
func rawFrame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// rawSend opens a raft stream to addr as a forger would, writes the magic
// and data, and reports whether the server closed the connection.
func rawSend(t *testing.T, c net.Conn, data ...[]byte) (closed bool) {
	t.Helper()
	defer c.Close()
	if _, err := c.Write([]byte(rawMagic)); err != nil {
		return true
	}
	for _, d := range data {
		if _, err := c.Write(d); err != nil {
			return true
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

func dialT(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Many shards' senders at once: every envelope arrives, each sender's in
// its order, over the one raft stream.
func TestRawStreamManyShards(t *testing.T) {
	const shards, each = 16, 200
	l1, l2 := listen(t), listen(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	r2 := &recorder{got: make(chan struct{}, 1)}
	// A queue that holds every batch: nothing may be dropped.
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: &recorder{}, QueueLen: shards * each})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	var wg sync.WaitGroup
	for s := uint64(1); s <= shards; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= each; i++ {
				t1.Send(2, []Envelope{{ShardID: s, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Index: i,
					Entries: []raftpb.Entry{{Index: i, Data: bytes.Repeat([]byte{byte(s)}, 100)}}}}})
			}
		}()
	}
	wg.Wait()
	envs := r2.wait(t, shards*each)
	next := map[uint64]uint64{}
	for _, e := range envs {
		if e.Msg.Index != next[e.ShardID]+1 || len(e.Msg.Entries) != 1 || e.Msg.Entries[0].Data[0] != byte(e.ShardID) {
			t.Fatalf("shard %d: index %d after %d", e.ShardID, e.Msg.Index, next[e.ShardID])
		}
		next[e.ShardID] = e.Msg.Index
	}
	if !t1.Reachable(2) {
		t.Fatal("peer not reachable after delivering")
	}
}

// The sender reconnects when its peer restarts on the same address.
func TestRawStreamReconnectsAfterRestart(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	addr2 := l2.Addr().String()
	peers := map[uint64]string{1: l1.Addr().String(), 2: addr2}
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: &recorder{got: make(chan struct{}, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	r2 := &recorder{got: make(chan struct{}, 1)}
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(i uint64) []Envelope {
		return []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Commit: i}}}
	}
	t1.Send(2, msg(1))
	r2.wait(t, 1)
	t2.Close()

	r3 := &recorder{got: make(chan struct{}, 1)}
	var l3 net.Listener
	for deadline := time.Now().Add(10 * time.Second); ; {
		if l3, err = net.Listen("tcp", addr2); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t3, err := NewGRPC(Config{NodeID: 2, Listener: l3, Peers: peers, Handler: r3})
	if err != nil {
		t.Fatal(err)
	}
	defer t3.Close()
	// Raft retransmits; so does this test, until the new node hears.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(2); ; i++ {
			r3.mu.Lock()
			n := len(r3.envs)
			r3.mu.Unlock()
			if n > 0 || i > 2000 {
				return
			}
			t1.Send(2, msg(i))
			time.Sleep(10 * time.Millisecond)
		}
	}()
	envs := r3.wait(t, 1)
	<-done
	if envs[0].Msg.Commit < 2 {
		t.Fatalf("restarted peer got %+v", envs[0].Msg)
	}
}

// A frame that does not decode, a header over maxFrame, and a handler
// panic each close the stream and are counted; the server keeps serving
// raft streams and gRPC.
func TestRawStreamRefusesBadFrames(t *testing.T) {
	l := listen(t)
	h := &panicky{recorder{got: make(chan struct{}, 1)}}
	tr, err := NewGRPC(Config{NodeID: 1, Listener: l, Peers: map[uint64]string{1: l.Addr().String()}, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// A batch header claiming 2^40 envelopes in a 6-byte frame.
	if !rawSend(t, dialT(t, tr.Addr()), rawFrame([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x20})) {
		t.Fatal("garbage frame accepted")
	}
	if got := tr.Stats().BadFrames; got != 1 {
		t.Fatalf("bad frames counted: %d", got)
	}
	// A header claiming more than maxFrame.
	if !rawSend(t, dialT(t, tr.Addr()), binary.BigEndian.AppendUint32(nil, maxFrame+1)) {
		t.Fatal("oversize frame header accepted")
	}
	if got := tr.Stats().BadFrames; got != 2 {
		t.Fatalf("bad frames counted: %d", got)
	}
	ok := EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 1}}})
	if !rawSend(t, dialT(t, tr.Addr()), rawFrame(ok)) {
		t.Fatal("stream survived a handler panic")
	}
	if got := tr.Stats().Panics; got != 1 {
		t.Fatalf("panics counted: %d", got)
	}
	// A quiet, well-formed stream stays open.
	if rawSend(t, dialT(t, tr.Addr())) {
		t.Fatal("an idle raft stream was closed")
	}
	if err := sendRaw(t, rawConn(t, tr.Addr()), ok); err == nil {
		t.Fatal("gRPC raft stream survived a handler panic")
	}
}

// A header's claim costs only the bytes that really arrive.
func TestReadFrameGrowsWithData(t *testing.T) {
	buf, err := readFrame(bytes.NewReader(make([]byte, 10)), nil, 60<<20)
	if err == nil {
		t.Fatal("short frame read whole")
	}
	if cap(buf) > 64<<10 {
		t.Fatalf("10 bytes of a frame claiming 60 MiB allocated %d bytes", cap(buf))
	}
	data := bytes.Repeat([]byte("abc"), 100_000)
	buf, err = readFrame(bytes.NewReader(data), buf, len(data))
	if err != nil || !bytes.Equal(buf, data) || cap(buf) > 2*len(data) {
		t.Fatalf("read %d bytes (cap %d), err %v", len(buf), cap(buf), err)
	}
	if _, err := readFrame(bytes.NewReader(nil), nil, 1); err != io.EOF {
		t.Fatalf("empty reader: %v", err)
	}
}

// With mutual TLS, a raft stream from a node whose certificate another CA
// signed, or from a client without TLS, delivers nothing and is counted.
func TestRawStreamMutualTLSRefusesStrangers(t *testing.T) {
	files := peerCA(t, 1, 2)
	foreign := peerCA(t, 3)[3]
	l1, l2 := listen(t), listen(t)
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()}
	recs := map[uint64]*recorder{}
	trs := map[uint64]*GRPC{}
	for id, l := range map[uint64]net.Listener{1: l1, 2: l2} {
		srv, cli, err := security.PeerTLS(files[id])
		if err != nil {
			t.Fatal(err)
		}
		recs[id] = &recorder{got: make(chan struct{}, 1)}
		tr, err := NewGRPC(Config{NodeID: id, Listener: l, Peers: peers, Handler: recs[id], ServerTLS: srv, ClientTLS: cli})
		if err != nil {
			t.Fatal(err)
		}
		trs[id] = tr
		t.Cleanup(func() { tr.Close() })
	}
	trs[1].Send(2, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 5}}})
	if envs := recs[2].wait(t, 1); envs[0].Msg.Term != 5 {
		t.Fatalf("got %+v", envs[0])
	}

	vote := rawFrame(EncodeBatch([]Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgVote, From: 3, To: 1, Term: 99}}}))
	_, cli, err := security.PeerTLS(foreign)
	if err != nil {
		t.Fatal(err)
	}
	cli = cli.Clone()
	cli.InsecureSkipVerify = true // the forger trusts anyone; node 1 must not
	cli.VerifyConnection = nil
	tc := tls.Client(dialT(t, trs[1].Addr()), cli)
	if !rawSend(t, tc, vote) {
		t.Fatal("a raft stream with a certificate of another CA stayed open")
	}
	if !rawSend(t, dialT(t, trs[1].Addr()), vote) {
		t.Fatal("a raft stream without TLS stayed open")
	}
	// The stranger may see the refusal before node 1 counts it.
	for deadline := time.Now().Add(10 * time.Second); trs[1].Stats().TLSRefused < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := trs[1].Stats().TLSRefused; got != 2 {
		t.Fatalf("refused handshakes counted: %d, want 2", got)
	}
	recs[1].mu.Lock()
	defer recs[1].mu.Unlock()
	for _, e := range recs[1].envs {
		if e.Msg.From == 3 {
			t.Fatalf("node 1 received from a stranger: %+v", e)
		}
	}
}
