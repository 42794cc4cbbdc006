package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// grpcNode is one node of a cluster of stores over real gRPC transports.
type grpcNode struct {
	dir string
	eng *storage.Engine
	st  *Store
	tr  *transport.GRPC
}

type grpcCluster struct {
	// tune, if set, adjusts every node's store configuration; tuneTr,
	// its transport's.
	tune   func(*Config)
	tuneTr func(id uint64, cfg *transport.Config)
	t      *testing.T
	m      shard.Map
	peers  map[uint64]string
	nodes  map[uint64]*grpcNode
}

const testChunk = 16 << 10

func (c *grpcCluster) start(id uint64, fresh bool) {
	t := c.t
	n := c.nodes[id]
	eng, err := storage.Open(n.dir, storage.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// 50 ms ticks (an election timeout of 500 ms): shorter ones let a
	// loaded machine (the race detector, parallel packages) churn leaders.
	cfg := Config{NodeID: id, Engine: eng, Map: c.m, TickInterval: 50 * time.Millisecond,
		BalanceInterval: -1, SickThreshold: -1, OrphanInterval: 100 * time.Millisecond, PeerWait: 2 * time.Second, SnapshotChunk: testChunk, Logger: quiet,
		// A leader keeps the log of a stopped follower only up to 64
		// times TruncateBytes (1 KiB here): the tests that stop a node
		// make it need a snapshot.
		Replica: replica.Config{TruncateThreshold: 20, TruncateKeep: 2, TruncateBytes: 16}}
	if c.tune != nil {
		c.tune(&cfg)
	}
	st, err := New(cfg, fresh)
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	for i := 0; ; i++ { // the port may linger for a moment after a stop
		if l, err = net.Listen("tcp", c.peers[id]); err == nil || i == 100 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	tcfg := transport.Config{NodeID: id, Listener: l, Peers: c.peers,
		Handler: storeHandler{st}, Unreachable: st.Unreachable, Logger: quiet}
	if c.tuneTr != nil {
		c.tuneTr(id, &tcfg)
	}
	tr, err := transport.NewGRPC(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	st.SetTransport(tr)
	st.Start(fresh)
	n.eng, n.st, n.tr = eng, st, tr
}

func (c *grpcCluster) stop(id uint64) {
	n := c.nodes[id]
	if n.st == nil {
		return
	}
	n.tr.Close()
	n.st.Stop()
	n.eng.Close()
	n.eng, n.st, n.tr = nil, nil, nil
}

func newGRPCCluster(t *testing.T) *grpcCluster {
	return newGRPCClusterOn(t, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
}

// newGRPCClusterOn starts a cluster whose peer ports listen picks.
func newGRPCClusterOn(t *testing.T, listen func() (net.Listener, error)) *grpcCluster {
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := &grpcCluster{t: t, m: m, peers: map[uint64]string{}, nodes: map[uint64]*grpcNode{}}
	// Every listener stays open until all ports are picked: a port
	// closed at once may be handed out again.
	var held []net.Listener
	for id := uint64(1); id <= 3; id++ {
		l, err := listen()
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
	for id := uint64(1); id <= 3; id++ {
		c.start(id, true)
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	return c
}

func (c *grpcCluster) leader() *grpcNode {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if n.st != nil && n.st.Replica(1).IsLeader() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return nil
}

// fill writes n values of 2000 bytes to shard 1 (node 3 may be down)
// and waits until nodes 1 and 2 have cut their logs, so node 3 needs a
// snapshot to catch up; it returns the last leader seen.
func (c *grpcCluster) fill(n int) *grpcNode {
	t := c.t
	lead := c.leader()
	value := make([]byte, 2000)
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprint("k", i))
		copy(value, k)
		cmd := wire.Command{RequestID: []byte(fmt.Sprint("id", i)), Op: wire.OpPut, Key: k, Value: value}
		// A leadership change (a loaded machine can miss heartbeats)
		// fails the proposal with NotLeader: find the leader and retry
		// under the same request id, which applies it once.
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := lead.st.Replica(1).ProposeEncoded(ctx, cmd.RequestID, k, cmd.Marshal())
			cancel()
			if err == nil {
				break
			}
			if !errors.Is(err, replica.ErrNotLeader) || attempt == 10 {
				t.Fatal(err)
			}
			lead = c.leader()
		}
	}
	// Both running nodes must have cut their logs: leadership can move
	// while node 3 comes back (a loaded machine misses heartbeats), and a
	// leader holding the whole log would send node 3 entries, not a
	// snapshot.
	for _, i := range []uint64{1, 2} {
		wait := time.Now().Add(20 * time.Second)
		for first, _ := c.nodes[i].st.Replica(1).LogBounds(); first <= raftlog.InitIndex+1; first, _ = c.nodes[i].st.Replica(1).LogBounds() {
			if time.Now().After(wait) {
				t.Fatalf("node %d's log was not truncated (first index %d)", i, first)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return lead
}

// A follower that missed more than the leader's log holds catches up by
// a snapshot streamed over gRPC in many chunks of at most the chunk size
// (plus one record), and ends with exactly the leader's data.
func TestSnapshotOverGRPCInChunks(t *testing.T) {
	c := newGRPCCluster(t)
	c.leader()
	c.stop(3)
	lead := c.fill(300)
	c.start(3, false)
	follower := c.nodes[3].st.Replica(1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		la, lh, err1 := lead.st.Replica(1).Hash()
		fa, fh, err2 := follower.Hash()
		if err1 == nil && err2 == nil && la == fa && lh == fh {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower at %d %s, leader at %d %s", fa, fh, la, lh)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The sender counts a stream once SendSnapshot returns, a moment after
	// the receiver installed it.
	var st SnapshotStats
	for st = lead.st.SnapshotStats(); st.Sent == 0 && time.Now().Before(deadline); st = lead.st.SnapshotStats() {
		time.Sleep(10 * time.Millisecond)
	}
	// Every chunk but the last holds the chunk size and at most one more
	// record (about 2 KiB here).
	if st.Sent == 0 || st.Bytes < 300*2000 || st.Chunks < st.Bytes/(testChunk+2100) || st.MaxChunk > testChunk+2100 {
		t.Fatalf("snapshot stats %+v", st)
	}
	if first, _ := follower.LogBounds(); first <= raftlog.InitIndex+1 {
		t.Fatalf("the follower caught up without a snapshot (first index %d)", first)
	}
}
