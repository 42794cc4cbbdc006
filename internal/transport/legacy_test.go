package transport

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
)

// A peer of an earlier version serves raft messages on the gRPC stream
// only: the sender notices its HTTP/2 greeting and sends there.
func TestRawStreamFallsBackToGRPCPeer(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	r2 := &recorder{got: make(chan struct{}, 1)}
	old := grpc.NewServer(grpc.ForceServerCodec(codec{}))
	old.RegisterService(&serviceDesc, &server{h: r2, cfg: Config{}.EnsureDefaults(), stats: &counters{}, snapSem: make(chan struct{}, 1)})
	go old.Serve(l2)
	defer old.Stop()
	tr, err := NewGRPC(Config{NodeID: 1, Listener: l1, Peers: map[uint64]string{1: l1.Addr().String(), 2: l2.Addr().String()},
		Handler: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	msg := func(i uint64) []Envelope {
		return []Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Commit: i}}}
	}
	// The first batches may be lost while the sender finds out, as raft
	// retransmits.
	var i uint64
	for deadline := time.Now().Add(10 * time.Second); ; {
		i++
		tr.Send(2, msg(i))
		r2.mu.Lock()
		n := len(r2.envs)
		r2.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing reached the gRPC-only peer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p, _ := tr.peer(2); !p.legacy.Load() {
		t.Fatal("sender not on the gRPC stream")
	}
	for k := i + 1; k <= i+50; k++ {
		tr.Send(2, msg(k))
	}
	envs := r2.wait(t, 51)
	for j := 1; j < len(envs); j++ {
		if envs[j].Msg.Commit != envs[j-1].Msg.Commit+1 {
			t.Fatalf("out of order: %d after %d", envs[j].Msg.Commit, envs[j-1].Msg.Commit)
		}
	}
}
