package kv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// A serializable read during a move, while one replica (S) has not
// applied the shard's membership changes yet: S answers a read naming the
// new epoch with its old descriptor, and the read must go on to a replica
// of the new view (not adopt S's older view and bounce between replicas
// that disagree until its refreshes run out with ErrWrongShard).
func TestSerializableReadDuringMoveWithLaggingReplica(t *testing.T) {
	c := newCluster(t, 5, 5, replica.Config{})
	old, _ := c.nodes[1].st.Descriptor(1)
	if !slices.Equal(old.Replicas, []uint64{1, 2, 3}) {
		t.Fatalf("shard 1 replicas %v", old.Replicas)
	}
	k := keyOf(c.m, 1, "lag-")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	leader := awaitLeader(t, c, 1)
	pl := slices.Index(old.Replicas, leader)
	stale := old.Replicas[(pl+1)%3] // S: the slot after the leader
	from := old.Replicas[(pl+2)%3]  // F: the slot after S, moved to node 4
	eventually(t, 5*time.Second, func() error {
		if _, _, err := c.nodes[stale].st.Replica(1).Get(k); err != nil {
			return err
		}
		return nil
	})
	c.nodes[stale].ad.deafShard.Store(1)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nd, err := c.nodes[leader].coord.MoveReplica(ctx, 1, from, 4)
	if err != nil {
		t.Fatalf("move %d -> 4: %v", from, err)
	}
	eventually(t, 10*time.Second, func() error {
		if c.nodes[from].st.Replica(1) != nil {
			return fmt.Errorf("node %d still holds shard 1", from)
		}
		if r := c.nodes[4].st.Replica(1); r == nil || r.Applied() == 0 || !r.Verified() {
			return errors.New("node 4's replica is not ready")
		}
		return nil
	})
	if e := c.nodes[stale].st.Replica(1).Desc().Epoch; e != old.Epoch {
		t.Fatalf("the lagging replica is at epoch %d, want %d", e, old.Epoch)
	}
	t.Logf("leader %d, lagging %d (epoch %d), moved %d -> 4, new descriptor %v epoch %d",
		leader, stale, old.Epoch, from, nd.Replicas, nd.Epoch)

	// Node 5 holds no replica of shard 1 and knows its new descriptor.
	c.nodes[5].st.LearnDescriptor(nd)
	fails := 0
	var first error
	for i := 0; i < 30; i++ {
		start := time.Now()
		v, err := c.nodes[5].coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil {
			fails++
			if first == nil {
				first = fmt.Errorf("%v (after %v)", err, time.Since(start).Round(time.Millisecond))
			}
			continue
		}
		if string(v.Data) != "v" {
			t.Fatalf("read %q", v.Data)
		}
	}
	if fails > 0 {
		t.Fatalf("%d of 30 serializable reads failed while three replicas could serve them; first: %v", fails, first)
	}
}

// The same during a split: a replica (S) that has not applied the split
// answers a read naming the shard's new epoch with its old, wider
// descriptor, from which nothing newer is learnt; the read must go on to
// the shard's other replicas, which have applied the split and serve it,
// not hand the refusal to the client.
func TestSerializableReadDuringSplitWithLaggingReplica(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	var keys [][]byte
	for i := 0; i < 10; i++ {
		k := keyOf(c.m, 1, fmt.Sprintf("lag%d-", i))
		keys = append(keys, k)
		if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := keys[len(keys)-1]
	leader := awaitLeader(t, c, 1)
	var stale uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != leader {
			stale = id
		}
	}
	eventually(t, 5*time.Second, func() error {
		_, _, err := c.nodes[stale].st.Replica(1).Get(k)
		return err
	})
	c.nodes[stale].ad.deafShard.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lower, upper, err := c.nodes[leader].coord.SplitShard(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A key of the lower half: shard 1, which the lagging replica holds
	// at its old epoch and range.
	owner := lower
	for _, kk := range keys {
		if lower.Contains(shardToken(kk)) {
			k = kk
		}
	}
	if !lower.Contains(shardToken(k)) {
		t.Fatal("no key in the lower half")
	}
	eventually(t, 10*time.Second, func() error {
		for _, id := range owner.Replicas {
			if id == stale {
				continue
			}
			if r := c.nodes[id].st.Replica(owner.ID); r == nil || r.Desc().Epoch != owner.Epoch {
				return fmt.Errorf("node %d has not applied the split", id)
			}
		}
		return nil
	})
	t.Logf("leader %d stale %d (epoch %d) owner %+v", leader, stale, c.nodes[stale].st.Replica(1).Desc().Epoch, owner)
	c.nodes[4].st.LearnDescriptor(lower)
	c.nodes[4].st.LearnDescriptor(upper)
	fails := 0
	var first error
	for i := 0; i < 30; i++ {
		v, err := c.nodes[4].coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil {
			fails++
			if first == nil {
				first = err
			}
			continue
		}
		if string(v.Data) != "v" {
			t.Fatalf("read %q", v.Data)
		}
	}
	if fails > 0 {
		t.Fatalf("lagging replica %d: %d of 30 serializable reads failed while two replicas of shard %d could serve them; first: %v", stale, fails, owner.ID, first)
	}
}

func shardToken(k []byte) uint64 { return shard.Token(k) }
