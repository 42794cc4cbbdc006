package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// newMoveCluster is n nodes over real gRPC on 127.0.0.1 of which the
// first three hold shard 1 (the only shard); the others hold nothing.
func newMoveCluster(t *testing.T, n int) *grpcCluster {
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := &grpcCluster{t: t, m: m, peers: map[uint64]string{}, nodes: map[uint64]*grpcNode{}}
	// Every listener stays open until all ports are picked: a port
	// closed at once may be handed out again.
	var held []net.Listener
	for id := uint64(1); id <= uint64(n); id++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		c.peers[id] = l.Addr().String()
		c.nodes[id] = &grpcNode{dir: t.TempDir()}
	}
	for _, l := range held {
		l.Close()
	}
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id, true)
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	return c
}

// shardLeader waits for a leader of shard 1 among the running nodes.
func (c *grpcCluster) shardLeader() *grpcNode {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.st == nil {
				continue
			}
			if r := n.st.Replica(1); r != nil && r.IsLeader() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

// write puts key=value through the shard's leader, retrying under the
// same request id through leader changes, until ctx ends.
func (c *grpcCluster) write(ctx context.Context, key, value string) error {
	cmd := wire.Command{RequestID: []byte("id-" + key), Op: wire.OpPut, Key: []byte(key), Value: []byte(value)}
	data := cmd.Marshal()
	for {
		var err error = replica.ErrNotLeader
		for _, n := range c.nodes {
			if n.st == nil {
				continue
			}
			if r := n.st.Replica(1); r != nil && r.IsLeader() {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = r.ProposeEncoded(actx, cmd.RequestID, cmd.Key, data)
				cancel()
				break
			}
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkAll waits until the replica of shard 1 on every node of nodes has
// applied the leader's commit index and holds every key of acked.
func (c *grpcCluster) checkAll(nodes []uint64, acked map[string]string) {
	t := c.t
	lead := c.shardLeader()
	commit := lead.st.Replica(1).Status().Commit
	for _, id := range nodes {
		r := c.nodes[id].st.Replica(1)
		if r == nil {
			t.Fatalf("node %d holds no replica of shard 1", id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := r.WaitApplied(ctx, commit)
		cancel()
		if err != nil {
			t.Fatalf("node %d: applied %d, want %d: %v", id, r.Applied(), commit, err)
		}
		for k, v := range acked {
			got, _, err := r.Get([]byte(k))
			if err != nil || string(got) != v {
				t.Fatalf("node %d: key %s = %q, %v; want %q", id, k, got, err, v)
			}
		}
	}
}

// moveUnderLoad moves shard 1's replica from node `from` to node 4,
// calling MoveReplica on node `caller`, while a writer keeps writing; it
// checks every acknowledged write is on every new replica afterwards.
func moveUnderLoad(t *testing.T, c *grpcCluster, caller, from uint64) {
	acked := map[string]string{}
	for i := 0; i < 50; i++ {
		k := fmt.Sprint("before-", i)
		if err := c.write(context.Background(), k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprint("during-", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.write(ctx, k, k)
			cancel()
			if err == nil {
				mu.Lock()
				acked[k] = k
				mu.Unlock()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err := c.nodes[caller].st.MoveReplica(ctx, 1, from, 4)
	cancel()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	for i := 0; i < 20; i++ {
		k := fmt.Sprint("after-", i)
		if err := c.write(context.Background(), k, k); err != nil {
			t.Fatal(err)
		}
		acked[k] = k
	}
	var members []uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != from {
			members = append(members, id)
		}
	}
	members = append(members, 4)
	c.checkAll(members, acked)

	// Every member's descriptor: from gone, 4 a voter, no learner left,
	// the epoch bumped by each of the three conf changes (learner, enter
	// joint, leave joint).
	for _, id := range members {
		c.waitDesc(id, "the move done", func(d shard.Descriptor) bool {
			return !d.HasReplica(from) && d.IsVoter(4) && len(d.Replicas) == 3 && len(d.Learners) == 0 && d.Epoch == 4
		})
	}
	// The removed replica goes, with its data; a tombstone refuses what
	// still comes for it.
	old := c.nodes[from]
	deadline := time.Now().Add(10 * time.Second)
	for old.st.Replica(1) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the removed replica is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.waitTombstone(old)
	ds, de := storage.DataSpan(0, 0)
	it, err := old.eng.NewIter(ds, de)
	if err != nil {
		t.Fatal(err)
	}
	if it.First() {
		t.Fatalf("node %d still holds key %q", from, it.Key())
	}
	it.Close()
	d, _ := old.st.Descriptor(1)
	if d.HasReplica(from) || !d.IsVoter(4) {
		t.Fatalf("the removed node's view: %+v", d)
	}
	before := old.st.Dropped()[DropRemoved]
	old.st.HandleRaft([]transport.Envelope{{ShardID: 1, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: members[0], To: from, Term: 100}}})
	if got := old.st.Dropped()[DropRemoved]; got != before+1 {
		t.Fatalf("late message: removed-replica drops %d, want %d", got, before+1)
	}
	if old.st.Replica(1) != nil {
		t.Fatal("a late message recreated the replica")
	}
	// A late creation request at an old epoch is refused too.
	stale := d.Clone()
	stale.Learners = append(stale.Learners, from)
	stale.Epoch = 2
	if err := old.st.CreateReplica(stale); !errors.Is(err, ErrRemoved) {
		t.Fatalf("stale creation: %v", err)
	}
}

// A follower's replica moves to a node that held none, over real gRPC,
// asked on the destination node (which forwards to the leader): writes
// before, during and after the move are all on the new replicas.
func TestMoveFollowerReplica(t *testing.T) {
	c := newMoveCluster(t, 4)
	lead := c.shardLeader()
	var from uint64
	for _, id := range []uint64{1, 2, 3} {
		if c.nodes[id] != lead {
			from = id
			break
		}
	}
	moveUnderLoad(t, c, 4, from)
}

// Moving the leader's own replica hands leadership over first.
func TestMoveLeaderReplica(t *testing.T) {
	c := newMoveCluster(t, 4)
	lead := c.shardLeader()
	var from uint64
	for id, n := range c.nodes {
		if n == lead {
			from = id
		}
	}
	moveUnderLoad(t, c, from, from)
}

// MoveReplica is idempotent: once done, calling it again changes nothing.
// Bad requests are refused at once.
func TestMoveIdempotentAndBadRequests(t *testing.T) {
	c := newMoveCluster(t, 4)
	lead := c.shardLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var from uint64
	for id, n := range c.nodes {
		if n != lead && id != 4 {
			from = id
		}
	}
	if err := lead.st.MoveReplica(ctx, 1, from, 4); err != nil {
		t.Fatal(err)
	}
	d, _ := lead.st.Descriptor(1)
	if err := c.nodes[4].st.MoveReplica(ctx, 1, from, 4); err != nil {
		t.Fatal(err)
	}
	if d2, _ := lead.st.Descriptor(1); d2.Epoch != d.Epoch {
		t.Fatalf("a repeated move changed the epoch: %d -> %d", d.Epoch, d2.Epoch)
	}
	for name, err := range map[string]error{
		"same node":     lead.st.MoveReplica(ctx, 1, 4, 4),
		"unknown shard": lead.st.MoveReplica(ctx, 9, 1, 4),
		"not a member":  lead.st.MoveReplica(ctx, 1, from, 5),
		"node 0":        lead.st.AddReplica(ctx, 1, 0, false),
	} {
		if !errors.Is(err, ErrBadChange) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A move to a node the shard's leader has not learned the address of yet
// (it just joined; the leader reads the membership record about once a
// second) waits for it (Config.PeerWait) instead of failing with
// ErrBadChange, and completes once the address is known.
func TestMoveWaitsForAJustJoinedPeer(t *testing.T) {
	c := newMoveCluster(t, 4)
	for id := uint64(1); id <= 3; id++ {
		c.nodes[id].tr.RemovePeer(4)
	}
	lead := c.shardLeader()
	var from uint64
	for id, n := range c.nodes {
		if n != lead && id != 4 {
			from = id
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		done <- lead.st.MoveReplica(ctx, 1, from, 4)
	}()
	select {
	case err := <-done:
		t.Fatalf("the move ended before node 4 was known: %v", err)
	case <-time.After(300 * time.Millisecond): // the move meets the unknown peer meanwhile
	}
	for id := uint64(1); id <= 3; id++ {
		if err := c.nodes[id].tr.SetPeer(4, c.peers[4]); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("move: %v", err)
	}
	c.waitDesc(4, "node 4 a voter", func(d shard.Descriptor) bool { return d.IsVoter(4) && !d.HasReplica(from) })
}
