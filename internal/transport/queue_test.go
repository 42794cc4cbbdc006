package transport

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// undrained is a transport with one peer, node 2, whose queue nothing
// drains (no sender runs), as when the peer stopped reading: what Send
// accepts stays queued. reported counts the messages raft heard lost.
func undrained(t *testing.T, cfg Config) (*GRPC, *peer, func() int) {
	t.Helper()
	var mu sync.Mutex
	reported := 0
	cfg.Unreachable = func(to uint64, shards []uint64) {
		if to != 2 {
			t.Errorf("reported unreachable: node %d", to)
		}
		mu.Lock()
		reported += len(shards)
		mu.Unlock()
	}
	tr := &GRPC{cfg: cfg.EnsureDefaults()}
	p := &peer{id: 2, queue: make(chan queued, tr.cfg.QueueLen)}
	tr.peers.Store(&map[uint64]*peer{2: p})
	return tr, p, func() int { mu.Lock(); defer mu.Unlock(); return reported }
}

func appendOf(index uint64, size int) []Envelope {
	return []Envelope{{ShardID: index, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2,
		Entries: []raftpb.Entry{{Index: index, Data: bytes.Repeat([]byte("v"), size)}}}}}
}

// queuedBytes empties p's queue and returns the encoded size of what it
// held, and how many batches.
func queuedBytes(p *peer) (size int64, batches int) {
	for {
		select {
		case b := <-p.queue:
			for _, e := range b.envs {
				size += int64(20 + e.Msg.Size())
			}
			batches++
		default:
			return size, batches
		}
	}
}

// A peer that does not drain holds at most QueueBytes of queued messages,
// however many are sent (large entries used to be bounded only by
// QueueLen batches: 1024 values of up to 56 MiB); what does not fit is
// dropped, counted and reported to raft, and a small message still fits
// in the room left.
func TestSendQueueBoundedInBytes(t *testing.T) {
	const budget = 1 << 20
	tr, p, reported := undrained(t, Config{QueueBytes: budget})
	const sends = 64
	for i := range sends {
		tr.Send(2, appendOf(uint64(i+1), 256<<10))
	}
	if got := p.queued.Load(); got > budget {
		t.Fatalf("%d bytes counted queued, over the budget %d", got, budget)
	}
	heartbeat := []Envelope{{ShardID: 99, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2}}}
	tr.Send(2, heartbeat)
	accounted := p.queued.Load()
	size, batches := queuedBytes(p)
	if size > budget {
		t.Fatalf("%d batches of %d bytes queued for a peer that does not drain, over the budget %d", batches, size, budget)
	}
	if size != accounted {
		t.Fatalf("queue holds %d bytes, %d counted", size, accounted)
	}
	if batches != 4 { // three 256 KiB entries and the heartbeat
		t.Fatalf("%d batches queued, want 4", batches)
	}
	dropped := sends - (batches - 1)
	if got := tr.Stats().QueueDrops; got != uint64(dropped) {
		t.Fatalf("QueueDrops %d, want %d", got, dropped)
	}
	if got := reported(); got != dropped {
		t.Fatalf("raft heard of %d lost messages, want %d", got, dropped)
	}
}

// A message larger than the budget goes when nothing else is queued for
// the peer (else a large entry could never reach a follower); the queue
// is then full for anything more until it has been written.
func TestSendQueueTakesALoneOversizeMessage(t *testing.T) {
	const budget = 1 << 20
	tr, p, reported := undrained(t, Config{QueueBytes: budget})
	tr.Send(2, appendOf(1, 4<<20))
	tr.Send(2, appendOf(2, 4<<20))
	tr.Send(2, appendOf(3, 1))
	size, batches := queuedBytes(p)
	if batches != 1 || size <= 4<<20 {
		t.Fatalf("queued %d batches of %d bytes, want the lone 4 MiB one", batches, size)
	}
	if got := tr.Stats().QueueDrops; got != 2 || reported() != 2 {
		t.Fatalf("QueueDrops %d, reported %d, want 2 and 2", got, reported())
	}
}

// The sender gives the bytes back once a batch is written, or dropped
// because the peer is down: a lone oversize message reaches the peer,
// then another, and a peer nobody listens for does not keep its budget.
func TestSendQueueReleasesBytes(t *testing.T) {
	l1, l2 := listenInRange(t), listenInRange(t)
	down := listenInRange(t)
	downAddr := down.Addr().String()
	down.Close() // nothing listens there: every connect fails
	peers := map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String(), 3: downAddr}
	r2 := &recorder{got: make(chan struct{}, 1)}
	t1, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: peers, Handler: &recorder{}, QueueBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t2, err := NewGRPC(Config{NodeID: 2, Listener: l2, Peers: peers, Handler: r2})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	p2, _ := t1.peer(2)
	p3, _ := t1.peer(3)
	drained := func(p *peer) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.queued.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d bytes still counted queued for node %d", p.queued.Load(), p.id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range 2 {
		t1.Send(2, appendOf(uint64(i+1), 4<<20))
		r2.wait(t, i+1)
		drained(p2)
	}
	for i := range 3 {
		t1.Send(3, appendOf(uint64(i+1), 600<<10))
		drained(p3)
	}
	if n := t1.Stats().QueueDrops; n != 0 {
		t.Fatalf("QueueDrops %d, want 0: each message was sent alone", n)
	}
}
