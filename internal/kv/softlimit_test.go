package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

func queueDepth(co *kv.Coordinator, shardID uint64) int64 {
	for _, q := range co.ShardQueues() {
		if q.Shard == shardID {
			return q.Depth
		}
	}
	return 0
}

// A shard that commits nothing (its log does not reach a quorum, while
// its leader stays: a stuck disk or network path on the followers) holds
// its requests until their deadline; once its queue on a node is at the
// soft limit, the next requests for it are refused at once
// (ErrShardOverloaded) instead of waiting too, and when the shard
// commits again and the queue drains, requests are admitted again — and
// the held writes were applied. (The shard is made stuck by losing its
// appends, not by stopping its other nodes: a node cut off from the
// rest answers "no leader" once its replica has been without a leader
// for an election timeout, 100 to 200 ms here, which a loaded machine
// can take before the test's checks are done.)
func TestShardSoftLimitRefusesStuckShardUntilItDrains(t *testing.T) {
	const limit = 4
	c := newCluster(t, 3, 1, replica.Config{})
	c.softLimit = limit
	c.stop(1)
	c.start(1, false)
	co := c.nodes[1].coord
	eventually(t, 10*time.Second, func() error {
		_, _, err := co.Put(ctx5(t), []byte("warm"), []byte("v"), kv.WriteOptions{})
		return err
	})
	mute := func(shardID uint64) {
		for _, n := range c.nodes {
			n.ad.muteAppends.Store(shardID)
		}
	}
	mute(1)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	held := make(chan error, limit)
	for i := range limit {
		go func() {
			_, _, err := co.Put(ctx, []byte(fmt.Sprint("held", i)), []byte("v"), kv.WriteOptions{})
			held <- err
		}()
	}
	eventually(t, 10*time.Second, func() error {
		if d := queueDepth(co, 1); d != limit {
			return fmt.Errorf("queue depth %d, want %d", d, limit)
		}
		return nil
	})
	// Refused at once, with the caller's deadline far away.
	if _, _, err := co.Put(ctx, []byte("over"), []byte("v"), kv.WriteOptions{}); !errors.Is(err, kv.ErrShardOverloaded) {
		t.Fatalf("write over the limit: %v, want ErrShardOverloaded", err)
	}
	if _, err := co.Get(ctx, []byte("warm"), kv.ReadOptions{}); !errors.Is(err, kv.ErrShardOverloaded) {
		t.Fatalf("read over the limit: %v, want ErrShardOverloaded", err)
	}
	if _, err := co.Head(ctx, []byte("warm"), kv.ReadOptions{Consistency: kv.Serializable}); !errors.Is(err, kv.ErrShardOverloaded) {
		t.Fatalf("head over the limit: %v, want ErrShardOverloaded", err)
	}

	mute(0)
	for range limit {
		if err := <-held; err != nil {
			t.Fatalf("held write: %v", err)
		}
	}
	if d := queueDepth(co, 1); d != 0 {
		t.Fatalf("queue depth %d after every request was answered", d)
	}
	if _, _, err := co.Put(ctx5(t), []byte("after"), []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatalf("write after the queue drained: %v", err)
	}
	for i := range limit {
		if _, err := co.Get(ctx5(t), []byte(fmt.Sprint("held", i)), kv.ReadOptions{}); err != nil {
			t.Fatalf("held write %d not applied: %v", i, err)
		}
	}
	var rejected uint64
	for _, q := range co.ShardQueues() {
		rejected += q.Rejected
	}
	if rejected != 3 {
		t.Fatalf("%d rejections counted, want 3", rejected)
	}
}
