package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// A cluster of in-process nodes over the in-memory transport, with real
// Pebble engines in temporary directories.
type tcluster struct {
	t     *testing.T
	net   *transport.Network
	m     shard.Map
	dirs  map[uint64]string
	nodes map[uint64]*tnode
	rcfg  replica.Config
	tick  time.Duration
	sick  time.Duration // store SickThreshold (0: default)
	// softLimit: the coordinators' ShardSoftLimit from the next start.
	softLimit int
}

type tnode struct {
	id    uint64
	eng   *storage.Engine
	st    *store.Store
	coord *kv.Coordinator
	ad    *adapter
}

type adapter struct {
	st    *store.Store
	coord *kv.Coordinator
	// dropProps and dropReads: this many incoming forwarded proposals
	// (MsgProp) and read index requests (MsgReadIndex) are lost.
	dropProps, dropReads atomic.Int32
	// deafShard: every incoming Raft message of this shard is lost (0:
	// none), so the node's replica of it applies nothing more.
	deafShard atomic.Uint64
	// hang: every incoming request waits until its context ends (a
	// paused node, as the transport sees one).
	hang atomic.Bool
	// muteAppends: this shard's incoming appends (MsgApp) are lost (0:
	// none); heartbeats pass, so its leader stays and its proposals
	// commit nothing until it is cleared.
	muteAppends atomic.Uint64
	// missLeave: this shard's entry that leaves a joint configuration
	// never arrives, nor any entry after it (0: none); leaveAt is that
	// entry's index once seen (missleave_test.go).
	missLeave, leaveAt atomic.Uint64
}

func (a *adapter) HandleRaft(envs []transport.Envelope) {
	if deaf := a.deafShard.Load(); deaf != 0 {
		kept := envs[:0:0]
		for _, e := range envs {
			if e.ShardID != deaf {
				kept = append(kept, e)
			}
		}
		envs = kept
	}
	if mute := a.muteAppends.Load(); mute != 0 {
		kept := envs[:0:0]
		for _, e := range envs {
			if e.ShardID != mute || e.Msg.Type != raftpb.MsgApp {
				kept = append(kept, e)
			}
		}
		envs = kept
	}
	if a.missLeave.Load() != 0 {
		envs = a.dropLeaveJoint(envs)
	}
	if a.dropProps.Load() > 0 || a.dropReads.Load() > 0 {
		kept := envs[:0:0]
		for _, e := range envs {
			if e.Msg.Type == raftpb.MsgProp && a.dropProps.Add(-1) >= 0 {
				continue
			}
			if e.Msg.Type == raftpb.MsgReadIndex && a.dropReads.Add(-1) >= 0 {
				continue
			}
			kept = append(kept, e)
		}
		envs = kept
	}
	a.st.HandleRaft(envs)
}
func (a *adapter) HandleSnapshot(ctx context.Context, env transport.Envelope, next func() ([]byte, error)) error {
	return a.st.HandleSnapshot(ctx, env, next)
}
func (a *adapter) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	if a.hang.Load() {
		<-ctx.Done()
		return &wire.Response{Status: wire.StatusTimeout, Message: "hung"}
	}
	return a.coord.HandleRequest(ctx, req)
}

func newCluster(t *testing.T, n, shards int, rcfg replica.Config) *tcluster {
	return newClusterTick(t, n, shards, rcfg, 10*time.Millisecond, 0)
}

func newClusterTick(t *testing.T, n, shards int, rcfg replica.Config, tick, sick time.Duration) *tcluster {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	m, err := shard.Bootstrap(ids, shards, min(3, n))
	if err != nil {
		t.Fatal(err)
	}
	c := &tcluster{t: t, net: transport.NewNetwork(), m: m, dirs: map[uint64]string{}, nodes: map[uint64]*tnode{}, rcfg: rcfg, tick: tick, sick: sick}
	for _, id := range ids {
		c.dirs[id] = t.TempDir()
	}
	for _, id := range ids { // every node knows every peer
		c.start(id, true)
	}
	t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
	return c
}

func (c *tcluster) start(id uint64, fresh bool) {
	eng, err := storage.Open(c.dirs[id], storage.Options{CacheSize: 4 << 20, MemTableSize: 4 << 20})
	if err != nil {
		c.t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.New(store.Config{
		NodeID: id, Engine: eng, Map: c.m, TickInterval: c.tick, SickThreshold: c.sick,
		BalanceInterval: -1, Replica: c.rcfg, Logger: logger,
	}, fresh)
	if err != nil {
		c.t.Fatal(err)
	}
	a := &adapter{st: st}
	tr := c.net.Join(id, a, st.Unreachable)
	st.SetTransport(tr)
	peers := map[uint64]string{}
	for pid := range c.dirs {
		peers[pid] = fmt.Sprint("mem-", pid)
	}
	a.coord = mustCoordinator(c.t, kv.Config{
		NodeID: id, HTTPAddr: fmt.Sprint("http-", id), Peers: peers, Replication: len(c.m.Shards[0].Replicas), Map: c.m, Store: st,
		Transport: tr, DefaultTimeout: 5 * time.Second, Logger: logger, Engine: eng, ShardSoftLimit: c.softLimit,
	})
	st.Start(fresh)
	c.nodes[id] = &tnode{id: id, eng: eng, st: st, coord: a.coord, ad: a}
}

func (c *tcluster) stop(id uint64) {
	n := c.nodes[id]
	c.net.Leave(id)
	n.st.Stop()
	if err := n.eng.Close(); err != nil {
		c.t.Errorf("close engine %d: %v", id, err)
	}
	delete(c.nodes, id)
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReplicationThroughEveryNode(t *testing.T) {
	c := newCluster(t, 3, 4, replica.Config{})
	for i := 0; i < 40; i++ {
		writer := c.nodes[uint64(i%3+1)]
		key := []byte(fmt.Sprintf("key-%d", i))
		if _, _, err := writer.coord.Put(ctx5(t), key, []byte(fmt.Sprint("v", i)), kv.WriteOptions{}); err != nil {
			t.Fatalf("put %s via node %d: %v", key, writer.id, err)
		}
	}
	// A write through a follower is answered when the follower applies it;
	// its leader may apply it a moment later.
	eventually(t, 5*time.Second, func() error {
		var leaderApplied uint64
		for _, n := range c.nodes {
			leaderApplied += n.st.LeaderApplied()
		}
		if leaderApplied != 40 {
			return fmt.Errorf("leaders counted %d applied writes, want 40", leaderApplied)
		}
		return nil
	})
	for i := 0; i < 40; i++ {
		key := []byte(fmt.Sprintf("key-%d", i))
		for _, n := range c.nodes {
			v, err := n.coord.Get(ctx5(t), key, kv.ReadOptions{})
			if err != nil || string(v.Data) != fmt.Sprint("v", i) {
				t.Fatalf("linearizable get %s via node %d: %q %v", key, n.id, v.Data, err)
			}
		}
		// Every replica applies every write (serializable reads converge).
		for _, n := range c.nodes {
			eventually(t, 5*time.Second, func() error {
				v, err := n.coord.Get(ctx5(t), key, kv.ReadOptions{Consistency: kv.Serializable})
				if err != nil || string(v.Data) != fmt.Sprint("v", i) {
					return fmt.Errorf("node %d: %q %v", n.id, v.Data, err)
				}
				return nil
			})
		}
	}
}

// ValueStore.PutIfAbsent writes a key once; later calls leave it as
// the first one wrote it and say so.
func TestValueStorePutIfAbsent(t *testing.T) {
	c := newCluster(t, 3, 2, replica.Config{})
	s := kv.ValueStore{C: c.nodes[2].coord}
	k := []byte("once")
	if written, err := s.PutIfAbsent(ctx5(t), k, []byte("a")); err != nil || !written {
		t.Fatalf("first: written=%v %v", written, err)
	}
	if written, err := (kv.ValueStore{C: c.nodes[3].coord}).PutIfAbsent(ctx5(t), k, []byte("b")); err != nil || written {
		t.Fatalf("second: written=%v %v, want not written", written, err)
	}
	if v, found, err := s.Get(ctx5(t), k); err != nil || !found || string(v) != "a" {
		t.Fatalf("get: %q %v %v, want a", v, found, err)
	}
}

func TestConditionalWritesAndVersions(t *testing.T) {
	c := newCluster(t, 3, 2, replica.Config{})
	n := c.nodes[2]
	k := []byte("cas")
	v1, created, err := n.coord.Put(ctx5(t), k, []byte("a"), kv.WriteOptions{Cond: kv.CondIfAbsent})
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	if _, _, err := n.coord.Put(ctx5(t), k, []byte("b"), kv.WriteOptions{Cond: kv.CondIfAbsent}); !errors.Is(err, kv.ErrPreconditionFailed) {
		t.Fatalf("second create: %v", err)
	}
	if _, _, err := n.coord.Put(ctx5(t), k, []byte("b"), kv.WriteOptions{Cond: kv.CondIfMatch, Version: v1 + 100}); !errors.Is(err, kv.ErrPreconditionFailed) {
		t.Fatalf("cas with wrong version: %v", err)
	}
	v2, created, err := n.coord.Put(ctx5(t), k, []byte("b"), kv.WriteOptions{Cond: kv.CondIfMatch, Version: v1})
	if err != nil || created || v2 <= v1 {
		t.Fatalf("cas: v2=%d v1=%d created=%v err=%v", v2, v1, created, err)
	}
	got, err := c.nodes[3].coord.Get(ctx5(t), k, kv.ReadOptions{})
	if err != nil || string(got.Data) != "b" || got.Version != v2 {
		t.Fatalf("get after cas: %q v%d %v", got.Data, got.Version, err)
	}
	if _, err := n.coord.Delete(ctx5(t), k, kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.coord.Delete(ctx5(t), k, kv.WriteOptions{}); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := c.nodes[1].coord.Get(ctx5(t), k, kv.ReadOptions{}); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

func TestRetriedRequestAppliesOnce(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	id := []byte("request-0001")
	k := []byte("counter")
	v1, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("x"), kv.WriteOptions{RequestID: id, Cond: kv.CondIfAbsent})
	if err != nil {
		t.Fatal(err)
	}
	// The retry (through another node) must get the first result, not a
	// precondition failure, and must not write again.
	v2, created, err := c.nodes[3].coord.Put(ctx5(t), k, []byte("x"), kv.WriteOptions{RequestID: id, Cond: kv.CondIfAbsent})
	if err != nil || v2 != v1 || !created {
		t.Fatalf("retry: v=%d (first %d) created=%v err=%v", v2, v1, created, err)
	}
	got, err := c.nodes[2].coord.Get(ctx5(t), k, kv.ReadOptions{})
	if err != nil || got.Version != v1 {
		t.Fatalf("version after retry %d want %d (%v)", got.Version, v1, err)
	}
}

// A write sent under the request id of an earlier, different write (the
// defect: a PUT to beta answered with alpha's version, beta never written)
// is refused with ErrRequestIDReused and writes nothing, through the
// leader and through a follower; a true retry still gets the first answer.
func TestReusedRequestIDDoesNotDropAWrite(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	id := []byte("reused-id")
	v1, _, err := c.nodes[1].coord.Put(ctx5(t), []byte("alpha"), []byte("a"), kv.WriteOptions{RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if _, _, err := n.coord.Put(ctx5(t), []byte("beta"), []byte("b"), kv.WriteOptions{RequestID: id}); !errors.Is(err, kv.ErrRequestIDReused) {
			t.Fatalf("put to beta under alpha's id via node %d: %v, want request id reused", n.id, err)
		}
		if _, err := n.coord.Delete(ctx5(t), []byte("alpha"), kv.WriteOptions{RequestID: id}); !errors.Is(err, kv.ErrRequestIDReused) {
			t.Fatalf("delete of alpha under its put's id via node %d: %v", n.id, err)
		}
		if _, err := n.coord.Get(ctx5(t), []byte("beta"), kv.ReadOptions{}); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("beta via node %d: %v, want absent", n.id, err)
		}
		if v, _, err := n.coord.Put(ctx5(t), []byte("alpha"), []byte("a"), kv.WriteOptions{RequestID: id}); err != nil || v != v1 {
			t.Fatalf("retry of alpha via node %d: v%d (first v%d) %v", n.id, v, v1, err)
		}
	}
}

func leaderOf(c *tcluster, shardID uint64) uint64 {
	for id, n := range c.nodes {
		if r := n.st.Replica(shardID); r != nil && r.IsLeader() {
			return id
		}
	}
	return 0
}

// awaitLeader waits until a replica of the shard leads it and returns its
// node.
func awaitLeader(t *testing.T, c *tcluster, shardID uint64) uint64 {
	t.Helper()
	var leader uint64
	eventually(t, 5*time.Second, func() error {
		if leader = leaderOf(c, shardID); leader == 0 {
			return errors.New("no leader")
		}
		return nil
	})
	return leader
}

func TestElectionAfterLeaderIsolated(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	k := []byte("k")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("before"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := leaderOf(c, 1)
	if old == 0 {
		t.Fatal("no leader")
	}
	c.net.Isolate(old, true)
	other := c.nodes[old%3+1]
	if _, _, err := other.coord.Put(ctx5(t), k, []byte("after"), kv.WriteOptions{}); err != nil {
		t.Fatalf("write after isolating leader %d: %v", old, err)
	}
	if nl := leaderOf(c, 1); nl == old {
		// The old leader may still think it leads until CheckQuorum fires,
		// but a new one must exist among the others.
		found := false
		for id, n := range c.nodes {
			if id != old && n.st.Replica(1).IsLeader() {
				found = true
			}
		}
		if !found {
			t.Fatal("no new leader")
		}
	}
	c.net.Isolate(old, false)
	eventually(t, 5*time.Second, func() error {
		v, err := c.nodes[old].coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil || string(v.Data) != "after" {
			return fmt.Errorf("old leader sees %q %v", v.Data, err)
		}
		return nil
	})
}

func TestRestartRecoversAndCatchesUp(t *testing.T) {
	c := newCluster(t, 3, 2, replica.Config{})
	for i := 0; i < 20; i++ {
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(fmt.Sprint("a", i)), []byte("1"), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(3)
	for i := 0; i < 20; i++ {
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(fmt.Sprint("b", i)), []byte("2"), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.start(3, false)
	for i := 0; i < 20; i++ {
		for _, k := range []string{fmt.Sprint("a", i), fmt.Sprint("b", i)} {
			eventually(t, 5*time.Second, func() error {
				_, err := c.nodes[3].coord.Get(ctx5(t), []byte(k), kv.ReadOptions{Consistency: kv.Serializable})
				return err
			})
		}
	}
}

// A leader keeps the log a stopped follower lacks (a node killed and
// restarted catches up from it, not from a snapshot of the whole shard),
// up to 64 times TruncateBytes of log.
func TestRestartCatchesUpFromLog(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{TruncateThreshold: 20, TruncateKeep: 2})
	c.stop(3)
	for i := 0; i < 100; i++ {
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint(i)), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lead := c.nodes[leaderOf(c, 1)]
	c.start(3, false)
	behind := c.nodes[3].st.Replica(1).Applied()
	if first, _ := lead.st.Replica(1).LogBounds(); first > behind+1 {
		t.Fatalf("leader log starts at %d, restarted replica applied %d: it needs a snapshot", first, behind)
	}
	eventually(t, 10*time.Second, func() error {
		v, err := c.nodes[3].coord.Get(ctx5(t), []byte("k99"), kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil || string(v.Data) != "99" {
			return fmt.Errorf("k99: %q %v", v.Data, err)
		}
		return nil
	})
}

func TestSnapshotCatchUpAfterTruncation(t *testing.T) {
	// 64 times TruncateBytes (1 KiB) is far less than the 100 writes' log: the
	// leader stops keeping it for the stopped follower.
	c := newCluster(t, 3, 1, replica.Config{TruncateThreshold: 20, TruncateKeep: 2, TruncateBytes: 16})
	c.stop(3)
	for i := 0; i < 100; i++ {
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte(fmt.Sprint("k", i)), []byte(fmt.Sprint(i)), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lead := c.nodes[leaderOf(c, 1)]
	c.start(3, false)
	behind := c.nodes[3].st.Replica(1).Applied()
	// The leader's log no longer holds what the restarted replica needs:
	// only a snapshot can bring it up to date.
	if first, _ := lead.st.Replica(1).LogBounds(); first <= behind+1 {
		t.Fatalf("leader log starts at %d, restarted replica applied %d: no truncation happened", first, behind)
	}
	for i := 0; i < 100; i++ {
		k := []byte(fmt.Sprint("k", i))
		eventually(t, 10*time.Second, func() error {
			v, err := c.nodes[3].coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
			if err != nil || string(v.Data) != fmt.Sprint(i) {
				return fmt.Errorf("%s: %q %v", k, v.Data, err)
			}
			return nil
		})
	}
}

// A leader whose disk stalls hands leadership to a healthy follower while
// the stall lasts, and writes keep succeeding. The stall (400 ms per
// commit) is shorter than the election timeout (1 s here), so without the
// health check the slow leader would keep its leadership.
func TestStalledLeaderHandsOver(t *testing.T) {
	c := newClusterTick(t, 3, 1, replica.Config{}, 100*time.Millisecond, 0)
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), []byte("k"), []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	sick := leaderOf(c, 1)
	c.nodes[sick].eng.SetCommitDelay(400 * time.Millisecond)
	defer c.nodes[sick].eng.SetCommitDelay(0)
	healthy := c.nodes[sick%3+1]
	eventually(t, 15*time.Second, func() error {
		// Keep the shard busy so the slow Readies show.
		_, _, _ = healthy.coord.Put(ctx5(t), []byte("k"), []byte("w"), kv.WriteOptions{})
		if l := leaderOf(c, 1); l == sick || l == 0 {
			return fmt.Errorf("leader still %d", l)
		}
		return nil
	})
	if _, _, err := healthy.coord.Put(ctx5(t), []byte("k"), []byte("after"), kv.WriteOptions{}); err != nil {
		t.Fatalf("write after the hand-over: %v", err)
	}
}

// lossyTransport loses the answer to the first forwarded write after the
// leader has executed it, as a connection reset would, and counts the
// write attempts.
type lossyTransport struct {
	transport.Transport
	mu       sync.Mutex
	attempts int
	reads    int
	failed   bool
}

func (l *lossyTransport) Request(ctx context.Context, to uint64, req *wire.Request) (*wire.Response, error) {
	resp, err := l.Transport.Request(ctx, to, req)
	if req.Kind == wire.KindRead {
		l.mu.Lock()
		l.reads++
		l.mu.Unlock()
	}
	if req.Kind != wire.KindWrite {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts++
	if !l.failed && err == nil && resp.Status == wire.StatusOK {
		l.failed = true
		return nil, errors.New("connection reset after the leader answered")
	}
	return resp, err
}

// A create-only write whose first answer is lost is retried under the same
// coordinator-made request id, so the retry is answered from the dedup
// table (created) instead of failing its own condition.
func TestLostAnswerRetryIsNotReevaluated(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	leader := awaitLeader(t, c, 1)
	follower := leader%3 + 1
	lossy := &lossyTransport{Transport: c.net.Join(99, &adapter{st: c.nodes[follower].st}, nil)}
	coord := mustCoordinator(t, kv.Config{NodeID: 99, Replication: 3, Map: c.m, Store: c.nodes[follower].st,
		Transport: lossy, DefaultTimeout: 5 * time.Second})
	k := []byte("created-once")
	// Ack 3/3: the leader must see every follower's progress, so the write
	// goes to it over the transport (not through the follower's Raft).
	v, created, err := coord.Put(ctx5(t), k, []byte("x"), kv.WriteOptions{Cond: kv.CondIfAbsent, Ack: 3, From: 3})
	if err != nil || !created {
		t.Fatalf("create-only write with a lost answer: v=%d created=%v err=%v", v, created, err)
	}
	lossy.mu.Lock()
	attempts := lossy.attempts
	lossy.mu.Unlock()
	if attempts < 2 {
		t.Fatalf("%d write attempts: the lost answer was not retried", attempts)
	}
	got, err := c.nodes[leader].coord.Get(ctx5(t), k, kv.ReadOptions{})
	if err != nil || got.Version != v {
		t.Fatalf("read back version %d want %d (%v)", got.Version, v, err)
	}
}

// PreVote and CheckQuorum: an isolated leader steps down by itself, and a
// follower cut off for many election timeouts does not disrupt the leader
// when it comes back (without PreVote it would return with a higher term
// and force an election).
func TestCheckQuorumAndPreVote(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{}) // ticks of 10 ms: election timeout 100–200 ms
	leader := awaitLeader(t, c, 1)
	c.net.Isolate(leader, true)
	eventually(t, 5*time.Second, func() error {
		if c.nodes[leader].st.Replica(1).IsLeader() {
			return fmt.Errorf("isolated node %d still believes it leads (CheckQuorum)", leader)
		}
		return nil
	})
	c.net.Isolate(leader, false)
	eventually(t, 5*time.Second, func() error {
		if leader = leaderOf(c, 1); leader == 0 {
			return errors.New("no leader after healing")
		}
		return nil
	})

	follower := leader%3 + 1
	term := c.nodes[leader].st.Replica(1).Term()
	c.net.Isolate(follower, true)
	time.Sleep(time.Second) // many election timeouts
	c.net.Isolate(follower, false)
	if _, _, err := c.nodes[leader].coord.Put(ctx5(t), []byte("k"), []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if got := c.nodes[follower].st.Replica(1).Applied(); got < c.nodes[leader].st.Replica(1).Applied() {
			return fmt.Errorf("follower applied %d", got)
		}
		return nil
	})
	if l, tm := leaderOf(c, 1), c.nodes[leader].st.Replica(1).Term(); l != leader || tm != term {
		t.Fatalf("leader %d term %d after the follower came back, was %d term %d (PreVote)", l, tm, leader, term)
	}
}

// A write through a follower goes to the leader inside the Raft stream,
// with no request of its own, and is answered once the follower applies
// it; a forwarded proposal that is lost is retried (through the leader's
// request path) and still applies once.
func TestFollowerWriteThroughRaft(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	leader := awaitLeader(t, c, 1)
	follower := leader%3 + 1
	eventually(t, 5*time.Second, func() error {
		if l := c.nodes[follower].st.Replica(1).Leader(); l != leader {
			return fmt.Errorf("follower knows leader %d", l)
		}
		return nil
	})
	counting := &lossyTransport{Transport: c.net.Join(99, &adapter{st: c.nodes[follower].st}, nil), failed: true}
	coord := mustCoordinator(t, kv.Config{NodeID: follower, Replication: 3, Map: c.m, Store: c.nodes[follower].st,
		Transport: counting, DefaultTimeout: 5 * time.Second})

	v1, created, err := coord.Put(ctx5(t), []byte("a"), []byte("1"), kv.WriteOptions{Cond: kv.CondIfAbsent})
	if err != nil || !created {
		t.Fatalf("write through a follower: v=%d created=%v err=%v", v1, created, err)
	}
	counting.mu.Lock()
	if counting.attempts != 0 {
		t.Fatalf("%d write requests sent: the write did not go through Raft", counting.attempts)
	}
	counting.mu.Unlock()

	c.nodes[leader].ad.dropProps.Store(1)
	v2, created, err := coord.Put(ctx5(t), []byte("b"), []byte("2"), kv.WriteOptions{Cond: kv.CondIfAbsent})
	if err != nil || !created {
		t.Fatalf("write whose forwarded proposal was lost: v=%d created=%v err=%v", v2, created, err)
	}
	if c.nodes[leader].ad.dropProps.Load() > 0 {
		t.Fatal("the proposal was not dropped")
	}
	for k, want := range map[string]uint64{"a": v1, "b": v2} {
		got, err := c.nodes[leader].coord.Get(ctx5(t), []byte(k), kv.ReadOptions{})
		if err != nil || got.Version != want {
			t.Fatalf("read %s back from the leader: version %d want %d (%v)", k, got.Version, want, err)
		}
	}

	// A linearizable read through the follower sees a write the leader
	// acknowledged a moment before, without a request to the leader.
	v3, _, err := c.nodes[leader].coord.Put(ctx5(t), []byte("c"), []byte("3"), kv.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := coord.Get(ctx5(t), []byte("c"), kv.ReadOptions{})
	if err != nil || got.Version != v3 || string(got.Data) != "3" {
		t.Fatalf("linearizable read through the follower: %q version %d want %d (%v)", got.Data, got.Version, v3, err)
	}
	counting.mu.Lock()
	if counting.reads != 0 {
		t.Fatalf("%d read requests sent: the read did not go through Raft", counting.reads)
	}
	counting.mu.Unlock()
	// A read index request lost on its way is retried.
	c.nodes[leader].ad.dropReads.Store(1)
	if got, err := coord.Get(ctx5(t), []byte("c"), kv.ReadOptions{}); err != nil || got.Version != v3 {
		t.Fatalf("read whose read index request was lost: version %d want %d (%v)", got.Version, v3, err)
	}
	if c.nodes[leader].ad.dropReads.Load() > 0 {
		t.Fatal("the read index request was not dropped")
	}
}

// mustCoordinator is kv.New, failing the test on an invalid config.
func mustCoordinator(t testing.TB, cfg kv.Config) *kv.Coordinator {
	t.Helper()
	c, err := kv.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
