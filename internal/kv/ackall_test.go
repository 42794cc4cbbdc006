package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"go.etcd.io/raft/v3"
)

// Writes and reads that wait for every replica (replicas=3/3) are answered
// once the last replica has the entry (writes: in its log, as the
// leader's progress shows) or has applied the read index (reads): the
// waits wake on the acknowledgement or the apply. With one follower cut
// off, a 3/3 write answers AckTimeout when its deadline passes, and the
// leader serves 3/3 writes again once the follower is back.
func TestAllReplicaAcks(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	leader := awaitLeader(t, c, 1)
	coord := c.nodes[leader].coord
	r := c.nodes[leader].st.Replica(1)
	all := kv.WriteOptions{Ack: 3, From: 3}
	term := r.Status().Term
	checked := 0
	for i := 0; i < 30; i++ {
		k := []byte(fmt.Sprint("k", i))
		v, _, err := coord.Put(ctx5(t), k, []byte("v"), all)
		if err != nil {
			t.Fatalf("3/3 put %d: %v", i, err)
		}
		// The leader's view of its followers is checked while it leads in
		// the term it led in at the start: a leader elected again (a
		// handover under load and back) starts its followers' progress
		// from nothing.
		if st := r.Status(); st.RaftState == raft.StateLeader && st.Term == term {
			checked++
			for id, pr := range st.Progress {
				if pr.Match < v {
					t.Fatalf("3/3 put %d answered at version %d while node %d holds the log up to %d", i, v, id, pr.Match)
				}
			}
		}
		got, err := coord.Get(ctx5(t), k, kv.ReadOptions{Ack: 3, From: 3})
		if err != nil || got.Version != v {
			t.Fatalf("3/3 read %d: version %d want %d (%v)", i, got.Version, v, err)
		}
	}

	if checked == 0 {
		t.Fatal("leadership moved before every write's check: the test proved nothing")
	}
	follower := leader%3 + 1
	c.net.Isolate(follower, true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := coord.Put(ctx, []byte("cut"), []byte("v"), all)
	if !errors.Is(err, kv.ErrAckTimeout) && !errors.Is(err, kv.ErrTimeout) {
		t.Fatalf("3/3 put with a follower cut off: %v, want an ack timeout", err)
	}
	c.net.Isolate(follower, false)
	eventually(t, 5*time.Second, func() error {
		_, _, err := coord.Put(ctx5(t), []byte("back"), []byte("v"), all)
		return err
	})
}

// A 3/3 read asked while a follower is cut off is answered once the
// follower is back within the read's deadline: the leader asks the
// follower for its applied index again instead of giving up on the first
// failed ask (a restarted peer is unreachable for up to the transport's
// reconnect backoff after it is back).
func TestAllReplicaReadWaitsForAReturningFollower(t *testing.T) {
	c := newCluster(t, 3, 1, replica.Config{})
	leader := awaitLeader(t, c, 1)
	coord := c.nodes[leader].coord
	all := kv.WriteOptions{Ack: 3, From: 3}
	v, _, err := coord.Put(ctx5(t), []byte("k"), []byte("v"), all)
	if err != nil {
		t.Fatalf("3/3 put: %v", err)
	}
	follower := leader%3 + 1
	c.net.Isolate(follower, true)
	type result struct {
		got kv.Value
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := coord.Get(ctx5(t), []byte("k"), kv.ReadOptions{Ack: 3, From: 3})
		done <- result{got, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("3/3 read answered while a follower is cut off: version %d, %v", r.got.Version, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	c.net.Isolate(follower, false)
	r := <-done
	if r.err != nil || r.got.Version != v {
		t.Fatalf("3/3 read after the follower came back: version %d want %d (%v)", r.got.Version, v, r.err)
	}
}
