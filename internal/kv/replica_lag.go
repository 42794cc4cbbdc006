package kv

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/wire"
)

// A learner's lag is how many entries its applied index is behind its
// leader's. The leader's index is asked once per LagInterval (RunLagSampler)
// with a wire.KindAppliedIndex request for index 0, which the leader
// answers at once with its applied index: no Raft round, no wait. A leader
// applies what it commits within one Ready, so this is the lag behind the
// leader's commit index to within one apply round. The lag is taken when
// the answer arrives (the learner's applied index then), so it is up to
// one interval old; while the leader cannot be asked (an election), the
// last sample stands.

// LagInterval is how often RunLagSampler asks the leaders.
const LagInterval = time.Second

// lagAsk bounds one question to a leader.
const lagAsk = 500 * time.Millisecond

// lagTable is the learners' lags last sampled, by shard.
type lagTable struct {
	mu  sync.Mutex
	lag map[uint64]uint64
}

// RunLagSampler asks, every LagInterval until ctx ends, the leader of
// every shard this node holds a learner of for its applied index.
func (c *Coordinator) RunLagSampler(ctx context.Context) {
	t := time.NewTicker(LagInterval)
	defer t.Stop()
	for {
		c.sampleLags(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Coordinator) sampleLags(ctx context.Context) {
	type answer struct{ shard, index, lag uint64 }
	answers := make(chan answer)
	asked := 0
	learners := map[uint64]bool{}
	for id, r := range c.cfg.Store.Replicas() {
		if !r.Desc().IsLearner(c.cfg.NodeID) {
			continue
		}
		learners[id] = true
		lead := r.Leader()
		if lead == 0 || lead == c.cfg.NodeID {
			continue
		}
		asked++
		go func(id, lead uint64, r *replica.Replica) {
			actx, cancel := context.WithTimeout(ctx, lagAsk)
			defer cancel()
			req := &wire.Request{Kind: wire.KindAppliedIndex, Sender: c.cfg.NodeID, ShardID: id}
			if dl, ok := actx.Deadline(); ok {
				req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
			}
			a := answer{shard: id}
			if resp, err := c.cfg.Transport.Request(actx, lead, req); err == nil && resp.Status == wire.StatusOK {
				a.index, a.lag = resp.Index, lagBehind(resp.Index, r.Applied())
			}
			answers <- a
		}(id, lead, r)
	}
	got := map[uint64]uint64{}
	for ; asked > 0; asked-- {
		if a := <-answers; a.index > 0 {
			got[a.shard] = a.lag
		}
	}
	c.lags.mu.Lock()
	defer c.lags.mu.Unlock()
	if c.lags.lag == nil {
		c.lags.lag = map[uint64]uint64{}
	}
	for id := range c.lags.lag {
		if !learners[id] {
			delete(c.lags.lag, id) // no longer a learner here
		}
	}
	for id, lag := range got {
		c.lags.lag[id] = lag
	}
}

// LearnerLag is one local learner's lag.
type LearnerLag struct {
	Shard uint64
	// Entries the learner's applied index is behind its leader's.
	Entries uint64
}

// LearnerLags returns the lag of every local learner whose leader
// answered at least once, in shard order.
func (c *Coordinator) LearnerLags() []LearnerLag {
	c.lags.mu.Lock()
	lags := make(map[uint64]uint64, len(c.lags.lag))
	for id, lag := range c.lags.lag {
		lags[id] = lag
	}
	c.lags.mu.Unlock()
	var out []LearnerLag
	for id, lag := range lags {
		r := c.cfg.Store.Replica(id)
		if r == nil || !r.Desc().IsLearner(c.cfg.NodeID) {
			continue
		}
		out = append(out, LearnerLag{Shard: id, Entries: lag})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// MaxLearnerLag is the largest of LearnerLags; false when there is none.
func (c *Coordinator) MaxLearnerLag() (uint64, bool) {
	lags := c.LearnerLags()
	var m uint64
	for _, l := range lags {
		m = max(m, l.Entries)
	}
	return m, len(lags) > 0
}

func lagBehind(leader, applied uint64) uint64 {
	if applied >= leader {
		return 0
	}
	return leader - applied
}
