package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// A node cut off from a shard's other replicas answers ErrNoLeader once
// its replica has known no leader for an election timeout, instead of
// holding each request until its deadline: a follower (which forgets its
// leader an election timeout after its last message) and a leader (which
// steps down at its quorum check) alike. Serializable reads are still
// served from the local replica, and the node serves linearizable
// requests again once it is back in touch.
func TestCutOffNodeAnswersNoLeader(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{}) // ticks of 10 ms: election timeout 100–200 ms
	k := []byte("k")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v1"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	leader := awaitLeader(t, c, 1)
	follower := leader%3 + 1

	for _, cut := range []struct {
		name string
		node uint64
	}{{"follower", follower}, {"leader", leader}} {
		n := c.nodes[cut.node]
		c.net.Isolate(cut.node, true)
		// Each call has 5 s; the node must answer well before, as soon
		// as its replica has been without a leader for an election
		// timeout (a few hundred ms here, far less than 3 s even on a
		// loaded machine).
		start := time.Now()
		_, _, err := n.coord.Put(ctx5(t), k, []byte("cut"), kv.WriteOptions{})
		if !errors.Is(err, kv.ErrNoLeader) || time.Since(start) > 3*time.Second {
			t.Fatalf("%s %d cut off: put answered %v after %v, want ErrNoLeader well before the 5 s deadline", cut.name, cut.node, err, time.Since(start))
		}
		// Now it is known: every request answers at once.
		start = time.Now()
		if _, err := n.coord.Get(ctx5(t), k, kv.ReadOptions{}); !errors.Is(err, kv.ErrNoLeader) || time.Since(start) > time.Second {
			t.Fatalf("%s %d cut off: linearizable get answered %v after %v, want ErrNoLeader at once", cut.name, cut.node, err, time.Since(start))
		}
		if _, err := n.coord.Head(ctx5(t), k, kv.ReadOptions{}); !errors.Is(err, kv.ErrNoLeader) {
			t.Fatalf("%s %d cut off: head answered %v, want ErrNoLeader", cut.name, cut.node, err)
		}
		if v, err := n.coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable}); err != nil || v.Version == 0 {
			t.Fatalf("%s %d cut off: serializable get answered %q %v, want the local replica's value", cut.name, cut.node, v.Data, err)
		}
		// The others elect a leader and serve as usual meanwhile.
		other := c.nodes[cut.node%3+1]
		if _, _, err := other.coord.Put(ctx5(t), k, []byte("v2"), kv.WriteOptions{}); err != nil {
			t.Fatalf("put through node %d while %d is cut off: %v", other.id, cut.node, err)
		}
		c.net.Isolate(cut.node, false)
		eventually(t, 5*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, _, err := n.coord.Put(ctx, k, []byte("back"), kv.WriteOptions{}); err != nil {
				return fmt.Errorf("put through node %d after healing: %w", cut.node, err)
			}
			return nil
		})
		eventually(t, 5*time.Second, func() error {
			if leader = leaderOf(c, 1); leader == 0 {
				return errors.New("no leader")
			}
			return nil
		})
	}
}

// hangingTransport never answers: a request waits until its context
// ends, as one to a peer whose packets are dropped does.
type hangingTransport struct{ transport.Transport }

func (hangingTransport) Request(ctx context.Context, _ uint64, _ *wire.Request) (*wire.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// An attempt already sent to the leader over the network (an ACK 3/3
// write goes there, not through the local replica's Raft) ends when the
// node's replica of the shard loses its leader, and the write is answered
// no leader then, not when the attempt's bound (2 s) passes.
func TestRemoteAttemptEndsWhenLeaderLost(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{}) // ticks of 10 ms: election timeout 100–200 ms
	leader := awaitLeader(t, c, 1)
	follower := leader%3 + 1
	eventually(t, 5*time.Second, func() error {
		if l := c.nodes[follower].st.Replica(1).Leader(); l != leader {
			return fmt.Errorf("follower %d knows leader %d, want %d", follower, l, leader)
		}
		return nil
	})
	tr := hangingTransport{c.net.Join(99, &adapter{st: c.nodes[follower].st}, nil)}
	coord := mustCoordinator(t, kv.Config{NodeID: 99, Replication: 3, Map: c.m, Store: c.nodes[follower].st,
		Transport: tr, DefaultTimeout: 5 * time.Second})
	c.net.Isolate(follower, true)
	defer c.net.Isolate(follower, false)
	start := time.Now()
	_, _, err := coord.Put(ctx5(t), []byte("k"), []byte("v"), kv.WriteOptions{Ack: 3, From: 3})
	took := time.Since(start)
	if !errors.Is(err, kv.ErrNoLeader) || took > 1500*time.Millisecond {
		t.Fatalf("ACK 3/3 put through a node cut off meanwhile: %v after %v, want ErrNoLeader before the attempt's 2 s bound", err, took)
	}
}
