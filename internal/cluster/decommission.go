package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
)

// A decommissioning node is marked removed once it holds no replica, and
// then exits: deciding so on a view that misses a shard it holds takes a
// voter from that shard, with nothing left to move it (the planner does
// not see the shard either). The balancing node's own view (the store's
// descriptors) can miss one: a split's new half starts on its parent's
// replicas — the draining node's among them — and a node that holds no
// replica of the parent learns of the new half only later (from a peer,
// a wrong-shard answer), while the move that took the draining node off
// the parent has taught it the parent's narrower range. So a member that
// holds nothing in that view is removed only once the members' own
// reports of their replicas confirm it, on a view that is complete
// (confirmView).

// drainLogEvery bounds how often the balancer logs why a member that
// looks drained stays decommissioning.
const drainLogEvery = time.Minute

// finishDecommissions marks removed every decommissioning member that
// holds no replica and has no move in flight: in descs, this node's view,
// and then in the current view of every shard (currentView), which must
// be complete. The shards the members report are learned (the planner
// moves the member's replicas of those next).
func (b *Balancer) finishDecommissions(ctx context.Context, rec Record, descs []shard.Descriptor) (Record, error) {
	var view []shard.Descriptor
	var incomplete error
	read := false
	for _, m := range rec.Members {
		if m.State != Decommissioning || holds(descs, m.ID) || b.moving(m.ID) {
			continue
		}
		if !read {
			view, incomplete = b.currentView(ctx, rec)
			read = true
		}
		if incomplete != nil {
			b.logDrainWait(m.ID, "balancer: a decommissioning node looks drained, but the shards' view is not complete; it stays until it is",
				"err", incomplete)
			continue
		}
		if d, ok := holder(view, m.ID); ok {
			b.logDrainWait(m.ID, "balancer: a decommissioning node still holds a replica of a shard this node had not seen; it is moved first",
				"shard", d.ID, "voters", d.Replicas, "learners", d.Learners, "epoch", d.Epoch)
			continue
		}
		var err error
		if rec, err = b.cfg.Manager.Update(ctx, func(r Record) (Record, bool, error) { return r.MarkRemoved(m.ID) }); err != nil {
			return rec, err
		}
		b.cfg.Logger.Info("balancer: node drained and removed", "id", m.ID)
	}
	return rec, nil
}

// logDrainWait logs msg about member id at most once every drainLogEvery.
func (b *Balancer) logDrainWait(id uint64, msg string, args ...any) {
	now := b.cfg.Now()
	b.mu.Lock()
	last, seen := b.mu.drainLogged[id]
	if seen && now.Sub(last) < drainLogEvery {
		b.mu.Unlock()
		return
	}
	b.mu.drainLogged[id] = now
	b.mu.Unlock()
	b.cfg.Logger.Info(msg, append([]any{"id", id}, args...)...)
}

// currentView asks every member not gone but this node for its
// replicas' descriptors (Prober.Replicas), teaches the store the newer
// ones, and returns this node's view with every shard at the newest
// epoch anyone reported, or why that view is no proof (confirmView).
func (b *Balancer) currentView(ctx context.Context, rec Record) ([]shard.Descriptor, error) {
	var asked []uint64
	for _, m := range rec.Members {
		if m.ID != b.cfg.NodeID && !m.State.Gone() {
			asked = append(asked, m.ID)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, min(b.cfg.Interval, time.Second))
	defer cancel()
	var mu sync.Mutex
	reports := map[uint64][]shard.Descriptor{}
	var wg sync.WaitGroup
	for _, id := range asked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := b.cfg.Prober.Replicas(pctx, id)
			if err != nil {
				return
			}
			mu.Lock()
			reports[id] = ds
			mu.Unlock()
		}()
	}
	wg.Wait()
	newest := map[uint64]shard.Descriptor{}
	for _, d := range b.cfg.Mover.Descriptors() {
		newest[d.ID] = d
	}
	reported := map[uint64]map[uint64]bool{} // shard -> nodes that reported it
	for node, ds := range reports {
		for _, d := range ds {
			if d.ID == 0 || len(d.Replicas) == 0 {
				continue
			}
			if reported[d.ID] == nil {
				reported[d.ID] = map[uint64]bool{}
			}
			reported[d.ID][node] = true
			if old, ok := newest[d.ID]; !ok || d.Epoch > old.Epoch {
				newest[d.ID] = d
				b.cfg.Mover.LearnDescriptor(d)
			}
		}
	}
	view := make([]shard.Descriptor, 0, len(newest))
	for _, d := range newest {
		view = append(view, d)
	}
	slices.SortFunc(view, func(x, y shard.Descriptor) int {
		if x.Start != y.Start {
			return cmp.Compare(x.Start, y.Start)
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return view, confirmView(view, reported, b.cfg.NodeID)
}

// confirmView reports why view (sorted by start) is no proof of where
// the replicas are: a token of the ring no shard of it owns (a shard
// this node has not heard of, such as a split's new half nobody
// reported), or a shard fewer than a majority of whose voters reported
// it (reported: shard -> nodes; self, this node, counts as reporting
// every shard it is a voter of: its view of a shard it holds is its
// replica's own). Nil when the view is complete.
func confirmView(view []shard.Descriptor, reported map[uint64]map[uint64]bool, self uint64) error {
	if at, gap := shard.FirstGap(view, func(d shard.Descriptor) (uint64, uint64) { return d.Start, d.End }); gap {
		return fmt.Errorf("no known shard owns token %#x", at)
	}
	for _, d := range view {
		n := 0
		for _, v := range d.Replicas {
			if v == self || reported[d.ID][v] {
				n++
			}
		}
		if n < len(d.Replicas)/2+1 {
			return fmt.Errorf("shard %d: %d of its voters %v reported it, want a majority", d.ID, n, d.Replicas)
		}
	}
	return nil
}

// holder returns a shard of descs with a replica (voter or learner) on
// node.
func holder(descs []shard.Descriptor, node uint64) (shard.Descriptor, bool) {
	for _, d := range descs {
		if d.HasReplica(node) {
			return d, true
		}
	}
	return shard.Descriptor{}, false
}
