package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync/atomic"
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
//
// From the restart to the healing a probe reads the damaged shard's keys
// of the unique-write set through the node, serializable (its local copy)
// and linearizable: the set's values are known without a record ("v" and
// the key's number) and never overwritten, so any of them answered with
// another value is a damaged value served, and fails the run. (The
// register keys are rewritten all the time, so their damage is soon
// overwritten by the log the node replays; the set's is not.)
type corruptFault struct{}

// repairBound: how long healing waits for the scrub to detect and repair
// the corrupted replica.
const repairBound = 45 * time.Second

func (corruptFault) Kind() string  { return "corrupt" }
func (corruptFault) Param() string { return "values" }

func (corruptFault) Inject(c *Cluster, n int) error {
	// Chosen before the stop, from the node's own shard map.
	id, regs := corruptTarget(c, n)
	keys := setKeysOf(c, n, id)
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
	c.Notef("%s on node %d (down; the shard holds %d of the 8 register keys)", lastLineOf(out), n, regs)
	if err := c.Start(n); err != nil {
		return err
	}
	p := startProbe(c, n, keys)
	c.setCorrupted(n, corruption{shard: id, probe: p})
	return nil
}

// setKeysOf lists the first 400 keys of the unique-write set (written or
// not yet) that shard id owns, as node n's shard map says.
func setKeysOf(c *Cluster, n int, id uint64) []int {
	ci, err := c.Info(n)
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(ci.Shards, func(s client.ShardInfo) bool { return s.ID == id })
	if i < 0 {
		return nil
	}
	var out []int
	for k := 0; k < 1<<20 && len(out) < 400; k++ {
		if ci.Shards[i].Owns(shard.Token([]byte(fmt.Sprintf("set/%06d", k)))) {
			out = append(out, k)
		}
	}
	return out
}

// probe reads set keys through one node until stopped.
type probe struct {
	stop       context.CancelFunc
	done       chan struct{}
	reads, bad atomic.Int64
	first      atomic.Value // string: the first damaged answer
}

func startProbe(c *Cluster, n int, keys []int) *probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{stop: cancel, done: make(chan struct{})}
	cl, err := client.New([]string{c.URL(n)}, c.clientOptions(2*time.Second))
	if err != nil || len(keys) == 0 {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			for _, k := range keys {
				key := fmt.Sprintf("set/%06d", k)
				for _, serializable := range []bool{true, false} {
					v, err := cl.Get(ctx, []byte(key), serializable)
					if err != nil {
						continue // not written yet, or no answer: no value served
					}
					p.reads.Add(1)
					if want := fmt.Sprint("v", k); string(v.Value) != want {
						if p.bad.Add(1) == 1 {
							p.first.Store(fmt.Sprintf("%s (serializable %v): %q, want %q", key, serializable, v.Value, want))
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return p
}

// finish stops the probe and reports a damaged value it read.
func (p *probe) finish(c *Cluster, n int) error {
	p.stop()
	<-p.done
	if b := p.bad.Load(); b > 0 {
		return fmt.Errorf("node %d served %d damaged values of %d set reads, first %v", n, b, p.reads.Load(), p.first.Load())
	}
	c.Notef("%d reads of the damaged shard's set keys through node %d, none damaged", p.reads.Load(), n)
	return nil
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
	cr, ok := c.corrupted(n)
	if !ok {
		return nil // the injection failed, and said so
	}
	id := cr.shard
	defer c.setCorrupted(n, corruption{})
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
				return cr.probe.finish(c, n)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	err := fmt.Errorf("scrub on node %d did not detect and repair shard %d within %v (mismatches %d, repairs %d, failures %d)",
		n, id, repairBound, last.Scrub.Mismatches, last.Scrub.Repairs, last.Scrub.RepairFailures)
	if perr := cr.probe.finish(c, n); perr != nil {
		err = fmt.Errorf("%w; %v", err, perr)
	}
	return err
}

// corruption is what a corrupt fault did to a node: the shard it damaged
// and the probe reading it.
type corruption struct {
	shard uint64
	probe *probe
}

// setCorrupted records (or, with a zero corruption, forgets) what a
// corrupt fault did to node n.
func (c *Cluster) setCorrupted(n int, cr corruption) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.corrupt == nil {
		c.corrupt = map[int]corruption{}
	}
	if cr.probe == nil {
		delete(c.corrupt, n)
		return
	}
	c.corrupt[n] = cr
}

func (c *Cluster) corrupted(n int) (corruption, bool) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	cr, ok := c.corrupt[n]
	return cr, ok
}
