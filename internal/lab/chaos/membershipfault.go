package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
)

// Bounds of the membership faults' healing: how long the cluster has
// after the fault's scheduled end to finish what it started.
const (
	drainTimeout  = 90 * time.Second  // a decommissioned node drains and leaves
	repairTimeout = 120 * time.Second // a dead node's replicas are rebuilt
	placeTimeout  = 60 * time.Second  // replicas match their descriptors after a move
	exitTimeout   = 20 * time.Second  // a removed node exits by itself
	// A dead node started again must learn it was removed; it first has
	// to find out from peers that no longer send it anything.
	deadRestartTimeout = 60 * time.Second
	moveCallBudget     = 60 * time.Second // one admin move call
)

// other returns a launcher node other than n (the node a membership
// fault asks or joins through).
func other(c *Cluster, n int) int {
	for i := 1; i <= c.Size(); i++ {
		if i != n && c.live(i) {
			return i
		}
	}
	return 0
}

// waitFor polls cond (which says what is still wrong, "" when nothing)
// until it holds or timeout passes, and returns its last answer.
func waitFor(timeout time.Duration, cond func() string) string {
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" || time.Now().After(deadline) {
			return why
		}
		time.Sleep(settlePoll)
	}
}

// decommissionFault drains the target under load: a new node joins first
// (a cluster of rf nodes cannot lose one), then the target is
// decommissioned through another node's admin call (POST
// /v1/admin/nodes/N/decommission). The balancer moves its replicas away
// and removes it; it exits by itself. Settled when no live node lists it
// as a replica holder or member. Healing waits for that (drainTimeout),
// then checks it from every live node's view and that the node exited.
// With noJoin the cluster already has a node to spare (a step before
// joined one).
type decommissionFault struct {
	watch  *settleWatch
	noJoin bool
}

func (*decommissionFault) Kind() string  { return "decommission" }
func (*decommissionFault) Param() string { return "" }

func (f *decommissionFault) Inject(c *Cluster, n int) error {
	if !f.noJoin {
		if _, err := c.joinNode(other(c, n)); err != nil {
			return err
		}
	}
	err := c.adminCall(n, func(ctx context.Context, a *client.Admin) error {
		_, err := a.Decommission(ctx, uint64(n))
		return err
	})
	if err != nil {
		return fmt.Errorf("decommission node %d: %w", n, err)
	}
	c.Notef("node %d decommissioning", n)
	f.watch = c.watchSettle(func() bool { return c.drained(n) == "" })
	return nil
}

func (f *decommissionFault) Heal(c *Cluster, n int) error {
	why := waitFor(drainTimeout, func() string { return c.drained(n) })
	if f.watch != nil && why == "" {
		f.watch.endSeen(c)
	} else if f.watch != nil {
		f.watch.end()
	}
	if why != "" {
		return fmt.Errorf("not drained %v after the fault's end: %s", drainTimeout, why)
	}
	select {
	case <-c.Exited(n):
	case <-time.After(exitTimeout):
		if hs, err := c.hashesOf(n); err == nil && len(hs) > 0 {
			return fmt.Errorf("node %d was removed but still runs and holds %d replicas", n, len(hs))
		}
		c.Kill(n)
		c.retire(n)
		return fmt.Errorf("node %d was removed but did not exit within %v", n, exitTimeout)
	}
	c.retire(n)
	c.Notef("node %d drained, removed and exited", n)
	return nil
}

// drained says why node n has not left the cluster yet, as every other
// live node sees it ("" : it left).
func (c *Cluster) drained(n int) string {
	views := c.liveViews()
	delete(views, uint64(n))
	if len(views) == 0 {
		return "no other live node answers"
	}
	for id, ci := range views {
		if why := drainProblem(ci, uint64(n)); why != "" {
			return fmt.Sprintf("node %d says: %s", id, why)
		}
	}
	return ""
}

// replaceDeadFault kill -9s the target, declares it dead (POST
// /v1/admin/nodes/N/remove?dead=true through another node) and starts a
// new node that joins; the balancer rebuilds the dead node's replicas on
// it from the survivors. Settled when every shard has its full replica
// count on live nodes; healing waits for that (repairTimeout), checks it
// from every live node's view, then starts the dead node again twice:
// each time it must exit by itself (exitTimeout), its log saying it was
// removed.
type replaceDeadFault struct{ watch *settleWatch }

func (*replaceDeadFault) Kind() string  { return "replace-dead" }
func (*replaceDeadFault) Param() string { return "" }

func (f *replaceDeadFault) Inject(c *Cluster, n int) error {
	c.Kill(n)
	c.retire(n)
	err := c.adminCall(n, func(ctx context.Context, a *client.Admin) error {
		_, err := a.RemoveDead(ctx, uint64(n))
		return err
	})
	if err != nil {
		return fmt.Errorf("declare node %d dead: %w", n, err)
	}
	c.Notef("node %d killed and declared dead", n)
	if _, err := c.joinNode(other(c, n)); err != nil {
		return err
	}
	f.watch = c.watchSettle(func() bool { return c.replicated() == "" })
	return nil
}

func (f *replaceDeadFault) Heal(c *Cluster, n int) error {
	why := waitFor(repairTimeout, c.replicated)
	if f.watch != nil {
		f.watch.end()
	}
	if why != "" {
		return fmt.Errorf("replication not restored %v after the fault's end: %s", repairTimeout, why)
	}
	c.Notef("every shard has %d replicas on live nodes", c.Replication())
	// The dead node started again on its data dir learns it was removed
	// and exits; started once more, it refuses to run at all.
	for range 2 {
		t0 := time.Now()
		if err := c.Start(n); err != nil {
			return err
		}
		select {
		case <-c.Exited(n):
		case <-time.After(deadRestartTimeout):
			c.Kill(n)
			return fmt.Errorf("node %d, declared dead, was started again and still ran %v later", n, deadRestartTimeout)
		}
		c.Notef("node %d started again exited after %.1fs", n, time.Since(t0).Seconds())
		if !strings.Contains(c.Log(n), "was removed from the cluster") {
			return fmt.Errorf("node %d, declared dead, started again and exited without saying it was removed", n)
		}
	}
	return nil
}

// replicated says which shard lacks its full replica count on live nodes
// in some live node's view ("" : none).
func (c *Cluster) replicated() string {
	live := c.liveNodes()
	views := c.liveViews()
	if len(views) < len(live) {
		return fmt.Sprintf("%d of %d live nodes answered", len(views), len(live))
	}
	for id, ci := range views {
		if why := replicationProblem(ci, live, c.Replication()); why != "" {
			return fmt.Sprintf("node %d says: %s", id, why)
		}
	}
	return ""
}

// killMoveFault kills both ends of a replica move in flight. With
// rebalancing switched off (so only this move runs) and snapshots
// streamed at killMoveRate (so the learner's catch-up lasts), a new node
// joins,
// and the target's replica of shard 1 is moved to it through a third
// node's admin call (POST /v1/admin/shards/1/move). As soon as the new
// node is a learner of the shard (the descriptor's epoch grew), the
// source is killed with SIGKILL, and killDelay later the destination.
// Healing restarts both, asks for the move again if the first call
// failed (asking again finishes a move: every step is decided from the
// applied configuration), and checks that every shard has a live leader
// and a quorum and that the replicas on the live nodes are exactly those
// their leader's descriptor lists (placementProblems).
type killMoveFault struct {
	dest  int
	shard uint64
	done  chan error // the first move call's answer
}

// killDelay separates the kill of the move's source from its
// destination's; killMoveRate is the snapshot rate (bytes/s) while the
// fault lasts.
const (
	killDelay    = time.Second
	killMoveRate = 256 << 10
)

func (*killMoveFault) Kind() string  { return "kill-during-move" }
func (*killMoveFault) Param() string { return "" }

func (f *killMoveFault) Inject(c *Cluster, n int) error {
	f.shard = 1
	off, rate := false, int64(killMoveRate)
	if err := c.adminCall(0, func(ctx context.Context, a *client.Admin) error {
		_, err := a.SetSettings(ctx, client.Settings{Rebalance: &off, SnapshotRate: &rate})
		return err
	}); err != nil {
		return fmt.Errorf("switch rebalancing off: %w", err)
	}
	via := other(c, n)
	dest, err := c.joinNode(via)
	if err != nil {
		return err
	}
	f.dest = dest
	epoch := func() (uint64, []uint64) {
		ci, err := c.infoOf(via)
		if err != nil {
			return 0, nil
		}
		for _, s := range ci.Shards {
			if s.ID == f.shard {
				return s.Epoch, s.Learners
			}
		}
		return 0, nil
	}
	e0, _ := epoch()
	f.done = make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), moveCallBudget)
		defer cancel()
		f.done <- c.moveAdmin(via).MoveShard(ctx, f.shard, uint64(n), uint64(dest))
	}()
	// The move is in flight once the epoch grows past e0 (the learner step).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if e, _ := epoch(); e > e0 {
			break
		}
		select {
		case err := <-f.done:
			f.done <- err
			return fmt.Errorf("the move of shard %d from %d to %d ended before it was seen in flight: %v", f.shard, n, dest, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the move of shard %d from %d to %d did not start within 20 s", f.shard, n, dest)
		}
	}
	c.killNode(n)
	e1, l1 := epoch()
	time.Sleep(killDelay)
	e2, l2 := epoch()
	c.killNode(dest)
	c.Notef("moving shard %d from node %d to node %d (epoch %d): killed the source at epoch %d (learners %v), the destination at epoch %d (learners %v)",
		f.shard, n, dest, e0, e1, l1, e2, l2)
	return nil
}

func (f *killMoveFault) Heal(c *Cluster, n int) error {
	if f.dest == 0 {
		return nil // not injected
	}
	if err := c.Start(n); err != nil {
		return err
	}
	if err := c.startNode(f.dest); err != nil {
		return err
	}
	var unlimited int64
	if err := c.adminCall(0, func(ctx context.Context, a *client.Admin) error {
		_, err := a.SetSettings(ctx, client.Settings{SnapshotRate: &unlimited})
		return err
	}); err != nil {
		return fmt.Errorf("lift the snapshot rate: %w", err)
	}
	var first error
	if f.done != nil {
		first = <-f.done
	}
	outcome := "the first call finished it"
	if first != nil {
		outcome = fmt.Sprintf("the first call answered %v", first)
		err := c.moveAgain(f.shard, uint64(n), uint64(f.dest))
		if err != nil {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status >= 500 {
				return fmt.Errorf("%s; asked again: %w", outcome, err)
			}
			outcome += fmt.Sprintf("; asked again: %v", err) // a 4xx: the move cannot be made (rolled back?) — the placement check decides
		} else {
			outcome += "; asked again, it finished"
		}
	}
	c.Notef("%s", outcome)
	t0 := time.Now()
	why := waitFor(placeTimeout, func() string { return strings.Join(c.placement(), "; ") })
	if why != "" {
		return fmt.Errorf("after %v: %s", placeTimeout, why)
	}
	c.Notef("replicas matched their descriptors %.1fs after the restarts", time.Since(t0).Seconds())
	if ci, err := c.infoOf(n); err == nil {
		for _, s := range ci.Shards {
			if s.ID == f.shard {
				c.Notef("shard %d: epoch %d, voters %v", s.ID, s.Epoch, s.Replicas)
			}
		}
	}
	return nil
}

// placement checks every shard's leader, quorum and replica set
// (placementProblems) against what the live nodes hold.
func (c *Cluster) placement() []string {
	live := c.liveNodes()
	views := c.liveViews()
	held := map[uint64][]uint64{}
	for id := range live {
		hs, err := c.hashesOf(int(id))
		if err != nil {
			return []string{err.Error()}
		}
		for _, h := range hs {
			held[id] = append(held[id], h.Shard)
		}
	}
	if len(views) < len(live) {
		return []string{fmt.Sprintf("%d of %d live nodes answered", len(views), len(live))}
	}
	out := placementProblems(views, held, live)
	for id, ci := range views {
		if m := moving(ci); m != "" {
			out = append(out, fmt.Sprintf("node %d says: %s", id, m))
		}
	}
	return out
}

// moveAdmin is an admin client of node id whose calls may last a whole
// move (the cluster's client gives up after 5 s).
func (c *Cluster) moveAdmin(id int) *client.Admin {
	x := c.adminOf(id)
	return client.NewAdmin(x.Endpoint(), &http.Client{Timeout: moveCallBudget + 5*time.Second})
}

// moveAgain asks a live node to move shard's replica from from to to,
// trying the next live node while one does not answer (a node just
// restarted), for moveCallBudget at most.
func (c *Cluster) moveAgain(shard, from, to uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), moveCallBudget)
	defer cancel()
	for {
		var err error
		for _, id := range c.allNodes() {
			if !c.live(id) {
				continue
			}
			err = c.moveAdmin(id).MoveShard(ctx, shard, from, to)
			var ce *client.Error
			if err == nil || errors.As(err, &ce) && ce.Status != http.StatusServiceUnavailable {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
