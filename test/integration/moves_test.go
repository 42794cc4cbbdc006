package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// moveShardView is the part of GET /v1/cluster a move changes.
type moveShardView struct {
	ID       uint64   `json:"id"`
	Epoch    uint64   `json:"epoch"`
	Replicas []uint64 `json:"replicas"`
	Learners []uint64 `json:"learners"`
	Leader   uint64   `json:"leader"`
}

func (c *cluster) shardView(i int, id uint64) (moveShardView, error) {
	code, body, err := c.get(i, "/v1/cluster")
	if err != nil || code != 200 {
		return moveShardView{}, fmt.Errorf("GET /v1/cluster on node %d: %d %v", i, code, err)
	}
	var ci struct {
		Shards []moveShardView `json:"shards"`
	}
	if err := json.Unmarshal([]byte(body), &ci); err != nil {
		return moveShardView{}, err
	}
	for _, s := range ci.Shards {
		if s.ID == id {
			return s, nil
		}
	}
	return moveShardView{}, fmt.Errorf("node %d: no shard %d", i, id)
}

// TestMoveReplicaUnderLoad: in a 4-node cluster (16 shards, replication
// 3), one shard's replica moves from its leader's node to node 4, which
// holds no replica of that shard, through POST
// /v1/admin/shards/{id}/move on a third node, while writers send writes
// of that shard's keys to every node. No write fails, every acknowledged
// write reads back from every node afterwards, and every node's
// /v1/cluster shows the new members and epoch. Bad ids get 400 JSON.
func TestMoveReplicaUnderLoad(t *testing.T) {
	c := newCluster(t, 4)
	ci, err := c.clusterInfo(1)
	if err != nil {
		t.Fatal(err)
	}
	var id, from uint64
	for _, s := range ci.Shards {
		if !s.HasReplica(4) && s.Leader != 0 {
			id, from = s.ID, s.Leader
			break
		}
	}
	if id == 0 {
		t.Fatal("node 4 holds a replica of every shard: the test proves nothing")
	}
	var tokStart, tokEnd uint64
	for _, s := range ci.Shards {
		if s.ID == id {
			fmt.Sscanf(s.TokenStart, "%x", &tokStart)
			if s.TokenEnd != "10000000000000000" {
				fmt.Sscanf(s.TokenEnd, "%x", &tokEnd)
			}
		}
	}
	d := shard.Descriptor{ID: id, Start: tokStart, End: tokEnd}
	var asker int
	for i := 1; i <= 3; i++ {
		if uint64(i) != from {
			asker = i
			break
		}
	}
	t.Logf("moving shard %d from node %d (its leader) to node 4, asked on node %d", id, from, asker)

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
				k := fmt.Sprintf("mv-%d-%d", w, n)
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
	mc := &http.Client{Timeout: 3 * time.Minute}
	url := fmt.Sprintf("%s/v1/admin/shards/%d/move?from=%d&to=4", c.url(asker), id, from)
	started := time.Now()
	resp, err := mc.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Status string           `json:"status"`
		Shard  shard.Descriptor `json:"shard"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	took := time.Since(started)
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("move: %d %v", resp.StatusCode, err)
	}
	during := written.Load() - before
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("move took %v; %d writes acknowledged during it, %d in all", took.Round(time.Millisecond), during, written.Load())
	if ans.Shard.ID != id || ans.Shard.HasReplica(from) || !ans.Shard.IsVoter(4) || ans.Shard.Epoch != 4 {
		t.Fatalf("answer: %+v", ans.Shard)
	}
	if len(failed) > 0 {
		t.Fatalf("%d writes failed, e.g.:\n%s", len(failed), strings.Join(failed[:min(5, len(failed))], "\n"))
	}
	if during == 0 {
		t.Fatal("no write was acknowledged during the move: the test proves nothing")
	}
	checkAll(t, c, acks.snapshot(), 1, 2, 3, 4)
	eventually(t, 10*time.Second, func() string {
		for i := 1; i <= 4; i++ {
			s, err := c.shardView(i, id)
			if err != nil {
				return err.Error()
			}
			if s.Epoch != 4 || slices.Contains(s.Replicas, from) || !slices.Contains(s.Replicas, 4) || len(s.Learners) > 0 {
				return fmt.Sprintf("node %d sees shard %d as %+v", i, id, s)
			}
		}
		return ""
	})
	// Node 4 serves the shard's keys from its own replica.
	for k, v := range acks.snapshot() {
		if r := c.get0(4, k, "1/3"); r.code != 200 || r.body != v {
			t.Fatalf("serializable read of %s on node 4: %v, want %q", k, r, v)
		}
		break
	}
	// Bad ids: not a number, no such shard, the same node twice, no
	// destination, a source that holds no replica (moving to a node that
	// holds none either).
	for target, want := range map[string]int{
		"/v1/admin/shards/x/move?from=1&to=4":                          400,
		"/v1/admin/shards/999/move?from=1&to=4":                        400,
		fmt.Sprintf("/v1/admin/shards/%d/move?from=1&to=1", id):        400,
		fmt.Sprintf("/v1/admin/shards/%d/move?from=%d", id, from):      400,
		fmt.Sprintf("/v1/admin/shards/%d/move?from=9&to=%d", id, from): 400,
	} {
		r := c.do("POST", c.url(asker)+target, nil)
		if r.code != want || !isJSONError(r.body) {
			t.Errorf("POST %s: %v, want %d with a JSON error", target, r, want)
		}
	}
}
