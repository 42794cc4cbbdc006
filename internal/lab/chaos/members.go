package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// What the membership faults wait for, at most.
const (
	adminRetryFor = 20 * time.Second // an admin call answered 503 (record not ready, no quorum) is retried this long
	settlePoll    = 250 * time.Millisecond
)

// extra returns the extra node with id, if a fault started one.
func (c *Cluster) extraNode(id int) (extraNode, bool) {
	for _, x := range c.extraNodes() {
		if x.id == id {
			return x, true
		}
	}
	return extraNode{}, false
}

// adminOf returns an admin client of node id, a launcher's node or one a
// fault started.
func (c *Cluster) adminOf(id int) *client.Admin {
	if id >= 1 && id <= c.Size() {
		return c.Admin(id)
	}
	x, _ := c.extraNode(id)
	return client.NewAdmin(x.url, c.hc)
}

// allNodes lists the ids of every node the run started: the launcher's
// and the faults'.
func (c *Cluster) allNodes() []int {
	out := make([]int, 0, c.Size()+c.extraCount())
	for i := 1; i <= c.Size(); i++ {
		out = append(out, i)
	}
	for _, x := range c.extraNodes() {
		out = append(out, x.id)
	}
	return out
}

// live reports whether node id runs and has not left the cluster.
func (c *Cluster) live(id int) bool {
	if c.isRetired(id) {
		return false
	}
	if id >= 1 && id <= c.Size() {
		return c.Running(id)
	}
	x, ok := c.extraNode(id)
	return ok && x.proc.Running()
}

// liveNodes is the set of live nodes (live).
func (c *Cluster) liveNodes() map[uint64]bool {
	out := map[uint64]bool{}
	for _, id := range c.allNodes() {
		if c.live(id) {
			out[uint64(id)] = true
		}
	}
	return out
}

// infoOf returns node id's view of the cluster, bounded by 5 s.
func (c *Cluster) infoOf(id int) (client.ClusterInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ci, err := c.adminOf(id).Cluster(ctx)
	if err != nil {
		return ci, fmt.Errorf("chaos: node %d: %w", id, err)
	}
	return ci, nil
}

// liveViews returns the view of the cluster of every live node that
// answers.
func (c *Cluster) liveViews() map[uint64]client.ClusterInfo {
	out := map[uint64]client.ClusterInfo{}
	for id := range c.liveNodes() {
		if ci, err := c.infoOf(int(id)); err == nil {
			out[id] = ci
		}
	}
	return out
}

// anyInfo returns the view of the first live node that answers.
func (c *Cluster) anyInfo() (client.ClusterInfo, error) {
	err := errors.New("chaos: no live node")
	for _, id := range c.allNodes() {
		if !c.live(id) {
			continue
		}
		var ci client.ClusterInfo
		if ci, err = c.infoOf(id); err == nil {
			return ci, nil
		}
	}
	return client.ClusterInfo{}, err
}

// hashesOf returns node id's shard fingerprints; none for a node that
// left the cluster (retired).
func (c *Cluster) hashesOf(id int) ([]checker.ShardHash, error) {
	if c.isRetired(id) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs, err := c.adminOf(id).Hashes(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: node %d: %w", id, err)
	}
	out := make([]checker.ShardHash, len(hs))
	for j, h := range hs {
		out[j] = checker.ShardHash(h)
	}
	return out, nil
}

// adminCall runs f against a live node other than skip, retrying while
// the cluster answers 503 or a node does not answer (adminRetryFor at
// most); other errors (4xx) end it at once.
func (c *Cluster) adminCall(skip int, f func(context.Context, *client.Admin) error) error {
	deadline := time.Now().Add(adminRetryFor)
	for {
		var err error = errors.New("chaos: no live node to ask")
		for _, id := range c.allNodes() {
			if id == skip || !c.live(id) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = f(ctx, c.adminOf(id))
			cancel()
			var ce *client.Error
			if err == nil || errors.As(err, &ce) && ce.Status != http.StatusServiceUnavailable {
				return err
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// retire records that node id left the cluster for good.
func (c *Cluster) retire(id int) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	if c.retired == nil {
		c.retired = map[int]bool{}
	}
	c.retired[id] = true
}

func (c *Cluster) isRetired(id int) bool {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	return c.retired[id]
}

// killNode kill -9s node id (a launcher's node or one a fault started).
func (c *Cluster) killNode(id int) {
	if id <= c.Size() {
		c.Kill(id)
		return
	}
	if x, ok := c.extraNode(id); ok {
		x.proc.Kill()
		<-x.proc.Done()
	}
}

// startNode starts node id again on its data dir (without --join for an
// extra node) if it is not running, and waits until it answers (30 s at
// most).
func (c *Cluster) startNode(id int) error {
	if id <= c.Size() {
		return c.Start(id)
	}
	c.notesMu.Lock()
	var x *extraNode
	for i := range c.extra {
		if c.extra[i].id == id {
			x = &c.extra[i]
		}
	}
	if x == nil || x.proc.Running() {
		c.notesMu.Unlock()
		return nil
	}
	p, err := launcher.StartProcess(c.Bin(), x.args, x.log, nil)
	if err == nil {
		x.proc = p
	}
	cp := *x
	c.notesMu.Unlock()
	if err != nil {
		return err
	}
	return c.waitAnswers(cp, 30*time.Second)
}

// settleWatch polls a condition in the background from a fault's
// injection until it holds (recording when in the cluster, for
// FaultResult.SettledMs) or the fault heals.
type settleWatch struct{ stop, done chan struct{} }

func (c *Cluster) watchSettle(cond func() bool) *settleWatch {
	w := &settleWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if cond() {
				c.notesMu.Lock()
				c.settled = time.Now()
				c.notesMu.Unlock()
				return
			}
			select {
			case <-w.stop:
				return
			case <-time.After(settlePoll):
			}
		}
	}()
	return w
}

// end stops the watch and waits for it.
func (w *settleWatch) end() {
	close(w.stop)
	<-w.done
}

// endSeen stops the watch after its condition was seen to hold by
// another poll (a healing step waiting for the same thing), recording now
// as the moment it settled if the watch's own poll had not seen it yet.
func (w *settleWatch) endSeen(c *Cluster) {
	w.end()
	c.notesMu.Lock()
	if c.settled.IsZero() {
		c.settled = time.Now()
	}
	c.notesMu.Unlock()
}

// takeSettled returns and forgets when the last fault's work was seen done
// (zero: not seen).
func (c *Cluster) takeSettled() time.Time {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	t := c.settled
	c.settled = time.Time{}
	return t
}

// holdsShare reports whether node id holds its share of the replicas as
// a live node sees the cluster, with no move in flight (shareProblem).
func (c *Cluster) holdsShare(id int) bool {
	ci, err := c.anyInfo()
	return err == nil && shareProblem(ci, uint64(id)) == ""
}

// setTransferLimit sets the cluster-wide transfer limit (PUT
// /v1/admin/settings), retrying while the membership record is not ready.
func (c *Cluster) setTransferLimit(n int) error {
	err := c.adminCall(0, func(ctx context.Context, a *client.Admin) error {
		_, err := a.SetSettings(ctx, client.Settings{TransferLimit: &n})
		return err
	})
	if err != nil {
		return fmt.Errorf("chaos: set the transfer limit to %d: %w", n, err)
	}
	return nil
}

// setSnapshotRate sets the cluster-wide snapshot rate (bytes/s, 0
// unlimited) like setTransferLimit.
func (c *Cluster) setSnapshotRate(r int64) error {
	err := c.adminCall(0, func(ctx context.Context, a *client.Admin) error {
		_, err := a.SetSettings(ctx, client.Settings{SnapshotRate: &r})
		return err
	})
	if err != nil {
		return fmt.Errorf("chaos: set the snapshot rate to %d: %w", r, err)
	}
	return nil
}
