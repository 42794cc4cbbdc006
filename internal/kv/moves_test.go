package kv_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
)

// A replica move under writes sent to every node's coordinator: no write
// fails (requests routed with the old descriptor are re-routed), every
// acknowledged write reads back from every node afterwards, and
// /v1/cluster on the node that lost its replica shows the new members and
// epoch.
func TestMoveUnderLoadThroughCoordinators(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	for _, id := range []uint64{1, 2, 3} {
		if c.nodes[id].st.Replica(1) == nil {
			t.Fatalf("node %d holds no replica of shard 1", id)
		}
	}
	stopWriters := loadWriters(c, []uint64{1, 2, 3, 4}, 1)
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	d, err := c.nodes[4].coord.MoveReplica(ctx, 1, 1, 4)
	cancel()
	time.Sleep(200 * time.Millisecond)
	acked, failures := stopWriters()
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if d.HasReplica(1) || !d.IsVoter(4) || d.Epoch != 4 {
		t.Fatalf("descriptor after the move: %+v", d)
	}
	if len(failures) > 0 {
		t.Fatalf("%d writes failed during the move, first: %v", len(failures), failures[0])
	}
	if len(acked) == 0 {
		t.Fatal("no write made it: the test proves nothing")
	}
	for id, n := range c.nodes {
		for k, v := range acked {
			got, err := n.coord.Get(ctx5(t), []byte(k), kv.ReadOptions{})
			if err != nil || string(got.Data) != v {
				t.Fatalf("node %d: %s = %q, %v", id, k, got.Data, err)
			}
		}
	}
	// Node 1 lost its replica: its /v1/cluster still describes shard 1,
	// with the new members.
	eventually(t, 10*time.Second, func() error {
		ci := c.nodes[1].coord.Cluster(ctx5(t))
		for _, s := range ci.Shards {
			if s.ID == 1 && s.Epoch == 4 && slices.Contains(s.Replicas, 4) && !slices.Contains(s.Replicas, 1) {
				return nil
			}
		}
		return fmt.Errorf("cluster view %+v", ci.Shards)
	})
}

// A learner shows in /v1/cluster, on a voter's node and on its own, with
// the epoch it brought, apart from the voters.
func TestClusterShowsLearners(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[2].st.AddReplica(ctx, 1, 4, true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 4} {
		eventually(t, 10*time.Second, func() error {
			for _, s := range c.nodes[id].coord.Cluster(ctx5(t)).Shards {
				if s.ID == 1 && s.Epoch == 2 && slices.Equal(s.Learners, []uint64{4}) && !slices.Contains(s.Replicas, 4) {
					return nil
				}
			}
			return fmt.Errorf("node %d does not show node 4 as a learner of shard 1", id)
		})
	}
}

// A read of a local replica that a move removed (its data deleted) never
// answers "not found" for a key that exists: it fails with
// replica.ErrStopped, and the coordinator reads elsewhere. (A
// linearizable read through a node being drained got "absent" when the
// removal deleted the data between its read index and its engine read.)
func TestReadOfARemovedReplicaIsRefused(t *testing.T) {
	c := newCluster(t, 4, 4, replica.Config{})
	k := keyOf(c.m, 1, "before-")
	if _, _, err := c.nodes[1].coord.Put(ctx5(t), k, k, kv.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := c.nodes[1].st.Replica(1)
	if v, err := c.nodes[1].coord.ReadLocal(old, k); err != nil || string(v.Data) != string(k) {
		t.Fatalf("before the move: %q %v", v.Data, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.nodes[4].coord.MoveReplica(ctx, 1, 1, 4); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if c.nodes[1].st.Replica(1) != nil || !old.Removed() {
			return fmt.Errorf("node 1 still holds its replica of shard 1")
		}
		return nil
	})
	if v, err := c.nodes[1].coord.ReadLocal(old, k); !errors.Is(err, replica.ErrStopped) {
		t.Fatalf("read of the removed replica: %q, %v; want replica.ErrStopped", v.Data, err)
	}
	got, err := c.nodes[1].coord.Get(ctx5(t), k, kv.ReadOptions{})
	if err != nil || string(got.Data) != string(k) {
		t.Fatalf("read through node 1 after the move: %q %v", got.Data, err)
	}
}

// putRetryingNoLeader puts k=k through coord within d, retrying an
// ErrNoLeader answer under the same request id (so it applies once), as
// a client does: a node answers "no leader" at once while its replica
// of the shard is between leaders (a handover under a move or split
// stalls on a loaded machine), and its next answer may be the new
// leader's.
func putRetryingNoLeader(coord *kv.Coordinator, k []byte, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	id := sha256.Sum256(k) // a request id of the key's own
	opts := kv.WriteOptions{RequestID: id[:]}
	for {
		_, _, err := coord.Put(ctx, k, k, opts)
		if err == nil || !errors.Is(err, kv.ErrNoLeader) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// loadWriters keeps one writer per node in nodes putting fresh keys of
// shard into c through that node's coordinator, a millisecond apart
// (each write retried within 5 s while answered "no leader"), until stop, which returns the acknowledged keys (each its own value)
// and the failed writes.
func loadWriters(c *tcluster, nodes []uint64, shard uint64) (stop func() (acked map[string]string, failures []error)) {
	var mu sync.Mutex
	acked := map[string]string{}
	var failures []error
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range nodes {
		wg.Add(1)
		go func(w uint64) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := keyOf(c.m, shard, fmt.Sprintf("w%d-%d-", w, i))
				err := putRetryingNoLeader(c.nodes[w].coord, k, 5*time.Second)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					acked[string(k)] = string(k)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}(w)
	}
	return func() (map[string]string, []error) {
		close(done)
		wg.Wait()
		return acked, failures
	}
}
