package replica

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// singleReplica opens a one-replica shard that leads itself. The test
// drives Process by hand.
func singleReplica(t *testing.T) *Replica {
	t.Helper()
	return singleReplicaWith(t, Config{})
}

// singleReplicaWith is singleReplica with cfg's settings.
func singleReplicaWith(t *testing.T, cfg Config) *Replica {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	cfg.NodeID, cfg.Desc, cfg.Engine = 1, shard.Descriptor{ID: 1, Replicas: []uint64{1}}, eng
	cfg.Send, cfg.Enqueue = func(uint64, []raftpb.Message) {}, func(uint64) {}
	r, err := Open(cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	r.Campaign()
	for i := 0; i < 10 && !r.IsLeader(); i++ {
		r.Process()
	}
	if !r.IsLeader() {
		t.Fatal("a one-replica shard did not elect itself")
	}
	return r
}

// Proposals of one round share entries, but never two on one key: the
// versions of a key's writes stay distinct and follow the proposal order.
func TestProposalsBatchWithOneCommandPerKeyPerEntry(t *testing.T) {
	r := singleReplica(t)
	r.Process()
	before := r.Applied()
	const n, keys = 300, 10
	results := make([]Result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		cmd := wire.Command{RequestID: []byte(fmt.Sprint("id", i)), Op: wire.OpPut,
			Key: []byte(fmt.Sprint("k", i%keys)), Value: []byte(fmt.Sprint(i))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Propose(context.Background(), &cmd)
			if err != nil {
				t.Errorf("propose %d: %v", i, err)
			}
			results[i] = res
		}()
		// Queue them in order, all before the round that takes them.
		for deadline := time.Now().Add(5 * time.Second); ; {
			r.in.Lock()
			queued := len(r.in.props)
			r.in.Unlock()
			if queued == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		r.Process()
		select {
		case <-done:
		case <-time.After(time.Millisecond):
			continue
		}
		break
	}
	last := map[int]uint64{}
	for i, res := range results {
		k := i % keys
		if res.Status != wire.StatusOK || res.Version <= last[k] {
			t.Fatalf("write %d to k%d: %+v after version %d", i, k, res, last[k])
		}
		last[k] = res.Version
	}
	// 30 writes per key need at least 30 entries; unbatched they take 300.
	if used := r.Applied() - before; used < n/keys || used > n/keys+5 {
		t.Fatalf("%d writes took %d entries", n, used)
	}
}
