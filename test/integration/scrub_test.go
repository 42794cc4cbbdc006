package integration

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
)

// A follower's values of one shard are changed while its node is down
// (through the storage engine, so Pebble's checksums still pass). After
// the restart, the scrub finds the replica outside its shard's majority,
// reports it (GET /v1/cluster, /metrics) and replaces it by a snapshot
// from the leader; no read through that node ever answers a changed
// value, and afterwards its local copy holds the written values again.
func TestScrubDetectsAndRepairsACorruptedReplica(t *testing.T) {
	// An hour: no scheduled scrub runs during the test; the restarted
	// node's replicas, unverified, ask for theirs.
	c := newCluster(t, 3, "--scrub-interval", "1h")
	keys := c.keysPerShard("scrub", 20)
	for _, k := range keys {
		if r := c.do("PUT", c.v1URL(1, k, ""), []byte("value of "+k)); r.code != 201 && r.code != 200 {
			t.Fatalf("PUT %s: %v", k, r)
		}
	}
	ci, err := c.clusterInfo(1)
	if err != nil {
		t.Fatal(err)
	}
	leader := int(ci.Shards[0].Leader)
	node := 1 + leader%3 // a follower of shard 1
	var mine []string
	for k, id := range c.shardOf(1, keys) {
		if id == ci.Shards[0].ID {
			mine = append(mine, k)
		}
	}

	c.stop(node)
	out, err := exec.Command(binary, "debug", "corrupt", "--data-dir", c.lc.Node(node).Dir,
		"--shard", "1", "--count", "10").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "corrupted 10 values of shard 1") {
		t.Fatalf("cairn debug corrupt: %v: %s", err, out)
	}
	c.start(node)

	// Read shard 1's keys through the restarted node until the repair is
	// seen: linearizable and serializable reads, each answered 200 only
	// with the written value.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok200 atomic.Int64
	var wrongMu sync.Mutex
	var wrong []string
	for _, q := range []string{"", "consistency=serializable"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				for _, k := range mine {
					r := c.doCtx(ctx, "GET", c.v1URL(node, k, q), nil)
					if r.code == 200 {
						ok200.Add(1)
						if r.body != "value of "+k {
							wrongMu.Lock()
							wrong = append(wrong, k+" "+q+": "+r.String())
							wrongMu.Unlock()
						}
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	var got client.ClusterInfo
	deadline := time.Now().Add(45 * time.Second)
	for {
		got, err = c.clusterInfo(node)
		// Every replica of the node verified (the others by a scrub that
		// agreed).
		if err == nil && got.Scrub.Mismatches > 0 && got.Scrub.Repairs > 0 && repaired(got, uint64(node)) &&
			got.Scrub.Unverified == 0 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatalf("node %d: no scrub repair within 45 s: %+v (err %v)", node, got.Scrub, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // reads after the repair
	stop()
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d reads through node %d answered a changed value, e.g. %s", len(wrong), node, wrong[0])
	}
	if ok200.Load() == 0 {
		t.Fatal("no read through the restarted node was answered")
	}
	for _, k := range mine {
		if r := c.do("GET", c.v1URL(node, k, "consistency=serializable"), nil); r.code != 200 || r.body != "value of "+k {
			t.Fatalf("after the repair, node %d's copy of %s: %v", node, k, r)
		}
	}
	// Each scrub that found the replica outside the majority counts (one
	// proposed while the first was judged counts too); one repair.
	_, metrics, err := c.get(node, "/metrics")
	if err != nil || !regexp.MustCompile(`(?m)^cairn_scrub_mismatches_total [1-9]`).MatchString(metrics) ||
		!regexp.MustCompile(`(?m)^cairn_scrub_repairs_total 1$`).MatchString(metrics) {
		t.Fatalf("node %d's /metrics lacks the mismatch and the repair (err %v)", node, err)
	}
	for i := 1; i <= 3; i++ {
		if i == node {
			continue
		}
		ci, err := c.clusterInfo(i)
		if err != nil {
			t.Fatal(err)
		}
		if ci.Scrub.Mismatches != 0 || ci.Scrub.Repairs != 0 || ci.Scrub.Scrubs == 0 {
			t.Errorf("node %d (not corrupted): scrub counts %+v", i, ci.Scrub)
		}
	}
	t.Logf("node %d: %+v; shard 1 there: %+v", node, got.Scrub, *got.Shards[0].Scrub)
}

// repaired reports whether node's replica of shard 1 is a voter again
// and verified, as node itself reports it.
func repaired(ci client.ClusterInfo, node uint64) bool {
	for _, s := range ci.Shards {
		if s.ID == 1 {
			return s.HasReplica(node) && s.Verified != nil && *s.Verified
		}
	}
	return false
}
