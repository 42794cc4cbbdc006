package transport

import (
	"bytes"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Close does not wait for a peer that stopped reading: the raft stream's
// sender, blocked in a write that only its 10 s deadline would end, has
// its connection closed when the peer's sender stops, so a node stopping
// (SIGTERM) is not held that long.
func TestCloseDoesNotWaitForAStalledPeer(t *testing.T) {
	// The stalled peer: accepts and never reads.
	stall := listen(t)
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := stall.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		stall.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	l1 := listen(t)
	tr, err := NewGRPC(Config{NodeID: 1, Listener: l1, Handler: &recorder{},
		Peers: map[uint64]string{2: stall.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	for i := 0; i < 12; i++ { // 48 MiB: more than the socket buffers hold
		tr.Send(2, []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2,
			Entries: []raftpb.Entry{{Index: uint64(i + 1), Data: big}}}}})
	}
	time.Sleep(time.Second) // the sender is now blocked in its write
	start := time.Now()
	done := make(chan struct{})
	go func() { tr.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return in 15 s")
	}
	if d := time.Since(start); d > rawWriteTimeout/2 {
		t.Fatalf("Close took %v waiting for a peer that does not read", d.Round(100*time.Millisecond))
	}
}
