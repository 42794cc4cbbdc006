package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// splitAnswer is POST /v1/admin/shards/{id}/split's answer.
type splitAnswer struct {
	Status string           `json:"status"`
	Shard  shard.Descriptor `json:"shard"`
	New    shard.Descriptor `json:"new_shard"`
}

func (c *cluster) split(t *testing.T, asker int, id uint64) splitAnswer {
	t.Helper()
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Post(fmt.Sprintf("%s/v1/admin/shards/%d/split", c.url(asker), id), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans splitAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 {
		t.Fatalf("split of shard %d on node %d: %d %v", id, asker, resp.StatusCode, err)
	}
	return ans
}

// TestSplitUnderLoad: in a 4-node cluster (16 shards, replication 3), a
// shard node 4 holds no replica of is split through POST
// /v1/admin/shards/{id}/split on node 4, then its new upper half is split
// again on node 1, while writers send writes of the shard's keys to every
// node. No write fails (requests in flight are retried on the right
// half), every acknowledged write reads back from every node afterwards,
// every node's /v1/cluster lists 18 shards covering the ring, and bad
// requests get 4xx JSON.
func TestSplitUnderLoad(t *testing.T) {
	c := newCluster(t, 4)
	ci, err := c.clusterInfo(1)
	if err != nil {
		t.Fatal(err)
	}
	var d shard.Descriptor
	for _, s := range ci.Shards {
		if !s.HasReplica(4) && s.Leader != 0 {
			d.ID = s.ID
			fmt.Sscanf(s.TokenStart, "%x", &d.Start)
			if s.TokenEnd != "10000000000000000" {
				fmt.Sscanf(s.TokenEnd, "%x", &d.End)
			}
			break
		}
	}
	if d.ID == 0 {
		t.Fatal("node 4 holds a replica of every shard: the test proves less")
	}
	acks := newAcked()
	var stop atomic.Bool
	var failed []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := 1; w <= 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				k := fmt.Sprintf("sp-%d-%d", w, n)
				if !d.Contains(shard.Token([]byte(k))) {
					continue
				}
				v := fmt.Sprint("v", n)
				r := c.put0((w+n)%4+1, k, v, "")
				if r.code == 201 {
					acks.add(k, v)
					written.Add(1)
				} else {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("PUT %s: %v", k, r))
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(time.Second)
	before := written.Load()
	first := c.split(t, 4, d.ID)
	time.Sleep(500 * time.Millisecond)
	second := c.split(t, 1, first.New.ID)
	time.Sleep(time.Second)
	during := written.Load() - before
	stop.Store(true)
	wg.Wait()
	t.Logf("shard %d split into %d and %d, then %d into %d and %d; %d writes acknowledged during the splits, %d in all",
		d.ID, first.Shard.ID, first.New.ID, second.Shard.ID, second.Shard.ID, second.New.ID, during, written.Load())
	if first.Shard.ID != d.ID || first.Shard.Start != d.Start || first.Shard.End != first.New.Start || first.New.End != d.End ||
		first.New.ID != first.New.Start || second.Shard.ID != first.New.ID || second.New.End != d.End {
		t.Fatalf("answers: %+v then %+v", first, second)
	}
	if len(failed) > 0 {
		t.Fatalf("%d writes failed, e.g.:\n%s", len(failed), strings.Join(failed[:min(5, len(failed))], "\n"))
	}
	if during == 0 {
		t.Fatal("no write was acknowledged during the splits: the test proves nothing")
	}
	checkAll(t, c, acks.snapshot(), 1, 2, 3, 4)
	eventually(t, 10*time.Second, func() string {
		for i := 1; i <= 4; i++ {
			ci, err := c.clusterInfo(i)
			if err != nil {
				return err.Error()
			}
			if len(ci.Shards) != 18 {
				return fmt.Sprintf("node %d lists %d shards", i, len(ci.Shards))
			}
		}
		return ""
	})
	for target, want := range map[string]int{
		"/v1/admin/shards/x/split":             400,
		"/v1/admin/shards/999/split":           400,
		"/v1/admin/shards/1/split?timeout=bad": 400,
		"/v1/admin/shards/1/splat":             404,
	} {
		r := c.do("POST", c.url(2)+target, nil)
		if r.code != want || !isJSONError(r.body) {
			t.Errorf("POST %s: %v, want %d with a JSON error", target, r, want)
		}
	}
	if r := c.do("GET", c.url(2)+"/v1/admin/shards/1/split", nil); r.code != 405 {
		t.Errorf("GET split: %v, want 405", r)
	}
}

// The chaos lab's split scenario, short: six splits under the recorded
// workload (one while a node is down); the history is linearizable, no
// acknowledged write is lost or applied twice, the replicas converge.
func TestChaosSplit(t *testing.T) {
	r, _, err := runChaosDepth(t, "--scenario", "split", "--duration", "30s")
	if err != nil {
		t.Fatalf("chaos run failed: %v", err)
	}
	if !r.Linearizable || r.LostWrites != 0 || !r.ReplicasConverged || r.AppliedTwice == nil || len(r.AppliedTwice) != 0 || r.Ops < 100 {
		t.Fatalf("checks: %+v", r)
	}
	if len(r.Faults) != 6 {
		t.Fatalf("faults: %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if f.Error != "" || f.Node == 0 {
			t.Fatalf("fault %+v", f)
		}
	}
}
