package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// readReplicaReads is the read replica's count of reads served by its own
// learners.
const readReplicaReads = "cairn_read_replica_reads_total"

// waitLearners waits until node base (the read replica id) sees every
// shard with itself as a learner, not a voter, with three voters, and its
// learner filled (applied index above 0: a learner still waiting for its
// snapshot leaves serializable reads to the voters); it returns how long
// that took.
func waitLearners(t *testing.T, base string, id uint64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, within, func() string {
		ci, err := client.NewAdmin(base, nil).Cluster(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, s := range ci.Shards {
			if !slices.Contains(s.Learners, id) || slices.Contains(s.Replicas, id) || len(s.Replicas) != 3 || s.Applied == 0 {
				return fmt.Sprintf("shard %d: voters %v learners %v applied %d", s.ID, s.Replicas, s.Learners, s.Applied)
			}
		}
		return ""
	})
	return time.Since(start)
}

// A node started with --role read-replica joins a 3-node cluster and gets
// a learner of every shard and no voter. It serves serializable and
// replicas=1/3 reads of every key itself (its count of reads served by its
// learners grows by exactly the reads sent), forwards linearizable reads
// (they see a write made through another node just before), and reports
// its lag in /v1/cluster and /metrics. Under a read-heavy load through it
// with the Go client, kill -9 of a shard's leader gives no read error.
func TestReadReplica(t *testing.T) {
	c := newCluster(t, 3)
	keys := c.keysPerShard("rr", 4)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(1, k, ""), []byte("v0-"+k)); r.code != 201 && r.code != 200 {
			t.Fatalf("PUT %s: %s", k, r)
		}
	}
	n4 := newExtraNode(t, 4)
	n4.start(t, "--join", c.url(1)+","+c.url(2), "--role", "read-replica")
	n4.waitUp(t)
	took := waitLearners(t, n4.url(), 4, 3*time.Minute)
	t.Logf("read replica: a learner of each of 16 shards within %v of the join", took.Round(100*time.Millisecond))
	nodes, err := client.NewAdmin(c.url(2), nil).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range nodes.Members {
		if want := map[bool]string{true: "read-replica", false: ""}[m.ID == 4]; m.Role != want {
			t.Fatalf("member %d has role %q, want %q", m.ID, m.Role, want)
		}
	}
	// Serializable and replicas=1/3 reads are served by node 4's learners.
	eventually(t, 30*time.Second, func() string {
		for _, k := range keys {
			if r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k)+"?consistency=serializable", nil); r.code != 200 || r.body != "v0-"+k {
				return fmt.Sprintf("serializable GET %s through node 4: %s", k, r)
			}
		}
		return ""
	})
	before := metric(t, c.hc, n4.url(), readReplicaReads)
	for _, k := range keys {
		if r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k)+"?consistency=serializable", nil); r.code != 200 || r.body != "v0-"+k {
			t.Fatalf("serializable GET %s through node 4: %s", k, r)
		}
		if r := c.do("GET", n4.url()+"/v0/entity?id="+escapeAll(k)+"&replicas=1/3", nil); r.code != 200 || r.body != "v0-"+k {
			t.Fatalf("replicas=1/3 GET %s through node 4: %s", k, r)
		}
	}
	if got := metric(t, c.hc, n4.url(), readReplicaReads) - before; got != float64(2*len(keys)) {
		t.Fatalf("node 4's learners served %v of %d local reads", got, 2*len(keys))
	}
	// Linearizable reads go to the leaders and see the latest write.
	before = metric(t, c.hc, n4.url(), readReplicaReads)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(3, k, ""), []byte("v1-"+k)); r.code != 200 && r.code != 201 {
			t.Fatalf("PUT %s: %s", k, r)
		}
		if r := c.do("GET", n4.url()+"/v1/kv/"+escapeAll(k), nil); r.code != 200 || r.body != "v1-"+k {
			t.Fatalf("linearizable GET %s through node 4 right after a write through node 3: %s", k, r)
		}
	}
	if got := metric(t, c.hc, n4.url(), readReplicaReads) - before; got != 0 {
		t.Fatalf("node 4's learners served %v linearizable reads; they go to the leaders", got)
	}
	// Its lag: per shard and the largest in /v1/cluster and /metrics; with
	// no writes going on it drops to 0. A shard's leader reports it too.
	eventually(t, 30*time.Second, func() string {
		ci, err := client.NewAdmin(n4.url(), nil).Cluster(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, m := range ci.Members {
			if m.NodeID == 4 && (m.Role != "read-replica" || m.MaxLag == nil || *m.MaxLag != 0) {
				return fmt.Sprintf("node 4's entry: role %q max lag %v", m.Role, m.MaxLag)
			}
		}
		for _, s := range ci.Shards {
			if s.Lag == nil || *s.Lag != 0 {
				return fmt.Sprintf("shard %d lag %v", s.ID, s.Lag)
			}
		}
		if v := metric(t, c.hc, n4.url(), "cairn_read_replica_max_lag_entries"); v != 0 {
			return fmt.Sprintf("max lag metric %v", v)
		}
		if v := metric(t, c.hc, n4.url(), `cairn_read_replica_lag_entries{shard="1"}`); v != 0 {
			return fmt.Sprintf("shard 1 lag metric %v", v)
		}
		ci1, err := c.clusterInfo(1)
		if err != nil {
			return err.Error()
		}
		for _, s := range ci1.Shards {
			if s.Leader == 1 {
				if lag, ok := s.LearnerLag[4]; !ok || lag != 0 {
					return fmt.Sprintf("shard %d's leader reports learner lags %v", s.ID, s.LearnerLag)
				}
			}
		}
		return ""
	})
	readLoadThroughLeaderKill(t, c, n4, keys)
}

// readLoadThroughLeaderKill runs a read-heavy load through the read
// replica (the Go client, 8 readers: 9 of 10 reads serializable, 1
// linearizable; 2 writers through the voters), kill -9s the leader of
// shard 1 and restarts it, and fails on any read error. It logs the
// figures (docs/operations.md).
func readLoadThroughLeaderKill(t *testing.T, c *cluster, n4 *extraNode, keys []string) {
	rc, err := client.New([]string{n4.url()}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.New([]string{c.url(1), c.url(2), c.url(3)}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads, lin, writes, writeErrs atomic.Int64
	var mu sync.Mutex
	var readErrs []string
	var maxLag atomic.Uint64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				k := keys[(w*7+i)%len(keys)]
				serializable := i%10 != 0
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				v, err := rc.Get(rctx, []byte(k), serializable)
				rcancel()
				if err == nil && !strings.HasSuffix(string(v.Value), "-"+k) {
					err = fmt.Errorf("value %q", v.Value)
				}
				if err != nil {
					mu.Lock()
					readErrs = append(readErrs, fmt.Sprintf("GET %s (serializable %v): %v", k, serializable, err))
					mu.Unlock()
					continue
				}
				reads.Add(1)
				if !serializable {
					lin.Add(1)
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				k := keys[(w*5+i)%len(keys)]
				wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := wc.Put(wctx, []byte(k), []byte(fmt.Sprintf("w%d.%d-%s", w, i, k)), client.PutOptions{})
				wcancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					writeErrs.Add(1)
				}
				writes.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // the lag the read replica reports under load
		defer wg.Done()
		for ctx.Err() == nil {
			if ci, err := client.NewAdmin(n4.url(), nil).Cluster(context.Background()); err == nil {
				for _, m := range ci.Members {
					if m.NodeID == 4 && m.MaxLag != nil && *m.MaxLag > maxLag.Load() {
						maxLag.Store(*m.MaxLag)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)
	steady := reads.Load()
	ci, err := c.clusterInfo(2)
	if err != nil {
		t.Fatal(err)
	}
	victim := int(ci.Shards[0].Leader)
	if victim < 1 || victim > 3 {
		t.Fatalf("shard 1's leader is node %d", victim)
	}
	killed := time.Now()
	c.kill(victim)
	t.Logf("killed node %d (leader of shard %d) under load", victim, ci.Shards[0].ID)
	time.Sleep(8 * time.Second)
	c.start(victim)
	time.Sleep(5 * time.Second)
	cancel()
	wg.Wait()
	total := time.Since(killed) + 3*time.Second
	t.Logf("read load through the read replica: %d reads (%d linearizable) in %v, %.0f reads/s (%.0f/s before the kill); %d writes (%d errors) through the voters; max lag seen %d entries; read errors %d",
		reads.Load(), lin.Load(), total.Round(time.Second), float64(reads.Load())/total.Seconds(), float64(steady)/3, writes.Load(), writeErrs.Load(), maxLag.Load(), len(readErrs))
	if len(readErrs) > 0 {
		t.Fatalf("%d read errors through the read replica, first: %s", len(readErrs), strings.Join(readErrs[:min(5, len(readErrs))], "; "))
	}
	if reads.Load() < 100 || lin.Load() == 0 {
		t.Fatalf("only %d reads (%d linearizable) went through", reads.Load(), lin.Load())
	}
	c.waitReady(readyTimeout)
}
