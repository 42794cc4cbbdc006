package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/shard"
)

// corruptFault changes the data of one replica while its node is down:
// it stops the target (SIGTERM), inverts the bytes of every user value of
// one shard in the node's data dir (`cairn debug corrupt`, through the
// storage engine, so Pebble's checksums still pass and only comparing
// replicas can tell), and starts it again. The shard is one the target
// follows that holds register keys, so the linearizability check reads
// the damaged keys (shard 1 when there is none). Healing waits until the
// node's scrub reported the mismatch and replaced the replica by a
// snapshot (docs/scrub.md), and fails the run if that does not happen
// within repairBound.
type corruptFault struct{}

// repairBound: how long healing waits for the scrub to detect and repair
// the corrupted replica.
const repairBound = 45 * time.Second

func (corruptFault) Kind() string  { return "corrupt" }
func (corruptFault) Param() string { return "values" }

func (corruptFault) Inject(c *Cluster, n int) error {
	id, regs := corruptTarget(c, n)
	if err := c.Stop(n); err != nil {
		c.Notef("%v", err) // killed after its bound: still stopped
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Bin(), "debug", "corrupt", "--data-dir", c.Node(n).Dir,
		"--shard", fmt.Sprint(id), "--count", "100000").CombinedOutput()
	if err != nil {
		_ = c.Start(n)
		return fmt.Errorf("cairn debug corrupt on node %d: %v: %s", n, err, lastLineOf(out))
	}
	c.setCorrupted(n, id)
	c.Notef("%s on node %d (down; the shard holds %d of the 8 register keys)", lastLineOf(out), n, regs)
	return c.Start(n)
}

// corruptTarget picks the shard whose replica on node n is damaged: the
// one n follows holding the most register keys, else shard 1; and how
// many register keys it holds.
func corruptTarget(c *Cluster, n int) (uint64, int) {
	ci, err := c.Info(n)
	if err != nil {
		return 1, 0
	}
	count := map[uint64]int{}
	for i := 0; i < 8; i++ { // the register keys of the default workload
		t := shard.Token([]byte(fmt.Sprintf("reg/%d", i)))
		for _, s := range ci.Shards {
			if s.Owns(t) && s.HasReplica(uint64(n)) && s.Leader != 0 && s.Leader != uint64(n) {
				count[s.ID]++
			}
		}
	}
	best := uint64(1)
	for id, k := range count {
		if k > count[best] || k == count[best] && id < best {
			best = id
		}
	}
	return best, count[best]
}

// Heal waits for the scrub to find and repair the damaged replica.
func (corruptFault) Heal(c *Cluster, n int) error {
	id, ok := c.corrupted(n)
	if !ok {
		return nil // the injection failed, and said so
	}
	start := time.Now()
	var last client.ClusterInfo
	for time.Since(start) < repairBound {
		ci, err := c.Info(n)
		if err == nil {
			last = ci
			i := slices.IndexFunc(ci.Shards, func(s client.ShardInfo) bool { return s.ID == id })
			if ci.Scrub.Mismatches > 0 && ci.Scrub.Repairs > 0 && i >= 0 && ci.Shards[i].HasReplica(uint64(n)) &&
				ci.Shards[i].Verified != nil && *ci.Shards[i].Verified {
				c.Notef("scrub on node %d: %d mismatch(es) found, %d repair(s) (shard %d a verified voter again %v after healing began)",
					n, ci.Scrub.Mismatches, ci.Scrub.Repairs, id, time.Since(start).Round(100*time.Millisecond))
				return nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("scrub on node %d did not detect and repair shard %d within %v (mismatches %d, repairs %d, failures %d)",
		n, id, repairBound, last.Scrub.Mismatches, last.Scrub.Repairs, last.Scrub.RepairFailures)
}

func (c *Cluster) setCorrupted(n int, id uint64) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.corrupt == nil {
		c.corrupt = map[int]uint64{}
	}
	c.corrupt[n] = id
}

func (c *Cluster) corrupted(n int) (uint64, bool) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	id, ok := c.corrupt[n]
	return id, ok
}
