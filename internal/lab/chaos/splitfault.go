package chaos

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/cairn-db/cairn/client"
)

// shardSplitFault splits a shard in two halves of its token range through
// the target node's admin API (POST /v1/admin/shards/{id}/split), under
// the workload: the widest shard of the target's view, so repeated splits
// go round the ring (shard 1 first). A split is instant and leaves
// nothing to undo; healing checks the cluster lists the new shard. With
// kill, the target is killed (kill -9) first and the split goes through
// the next node; healing restarts the target, which applies the split
// from its log, and checks it lists the new shards.
type shardSplitFault struct{ kill bool }

func (f shardSplitFault) Kind() string {
	if f.kill {
		return "kill+shard-split"
	}
	return "shard-split"
}

func (shardSplitFault) Param() string { return "" }

func (f shardSplitFault) Inject(c *Cluster, n int) error {
	if f.kill {
		c.Kill(n)
		n = n%c.Size() + 1
	}
	ci, err := c.Info(n)
	if err != nil {
		return err
	}
	var pick client.ShardInfo
	var widest *big.Int
	for _, s := range ci.Shards {
		w, ok := shardWidth(s)
		if ok && (widest == nil || w.Cmp(widest) > 0 || w.Cmp(widest) == 0 && s.ID < pick.ID) {
			pick, widest = s, w
		}
	}
	if widest == nil {
		return fmt.Errorf("chaos: node %d lists no shard", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Admin(n).SplitShard(ctx, pick.ID)
	if err != nil {
		return fmt.Errorf("chaos: split of shard %d through node %d: %w", pick.ID, n, err)
	}
	c.Notef("shard %d split through node %d: [%x, %x) and new shard %d [%x, %x)", pick.ID, n,
		res.Shard.Start, res.Shard.End, res.New.ID, res.New.Start, res.New.End)
	c.addSplit(res.New.ID)
	return nil
}

// Heal checks that the target node lists the shards the run's splits made
// (restarting it first after a kill).
func (f shardSplitFault) Heal(c *Cluster, n int) error {
	if f.kill {
		if err := c.Start(n); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ci, err := c.Info(n)
		if err == nil {
			missing := 0
			for _, id := range c.splits() {
				found := false
				for _, s := range ci.Shards {
					found = found || s.ID == id
				}
				if !found {
					missing++
				}
			}
			if missing == 0 {
				c.Notef("node %d lists %d shards", n, len(ci.Shards))
				return nil
			}
			err = fmt.Errorf("node %d does not list %d of the new shards", n, missing)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shardWidth is the number of tokens a shard owns.
func shardWidth(s client.ShardInfo) (*big.Int, bool) {
	start, ok1 := new(big.Int).SetString(s.TokenStart, 16)
	end, ok2 := new(big.Int).SetString(s.TokenEnd, 16)
	if !ok1 || !ok2 || end.Cmp(start) <= 0 {
		return nil, false
	}
	return end.Sub(end, start), true
}

func (c *Cluster) addSplit(id uint64) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	c.newShards = append(c.newShards, id)
}

func (c *Cluster) splits() []uint64 {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	return append([]uint64(nil), c.newShards...)
}
