package launcher

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// readyPoll is the pause between two readiness checks.
const readyPoll = 100 * time.Millisecond

// WaitReady polls until every running node answers GET /v1/status and its
// GET /v1/cluster names, for every shard, a leader that is a running node
// of the cluster. It fails at once when a node exited on its own since its
// last start (wrapping ErrAddrInUse when its log says a port was taken),
// when ctx ends, or after timeout (wrapping ErrNotReady).
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := c.crashed(); err != nil {
			return err
		}
		why := c.NotReady(ctx)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			if context.Cause(ctx) == context.DeadlineExceeded {
				return fmt.Errorf("%w after %v: %s", ErrNotReady, timeout, why)
			}
			return fmt.Errorf("launcher: waiting for the cluster: %w (%s)", context.Cause(ctx), why)
		case <-time.After(readyPoll):
		}
	}
}

// crashed describes the first node whose last run exited without the
// launcher's signal.
func (c *Cluster) crashed() error {
	for _, n := range c.nodes {
		n.mu.Lock()
		p, expected := n.proc, n.expected
		n.mu.Unlock()
		if p == nil || p.Running() || expected {
			continue
		}
		log := c.Log(n.ID)
		if c.cfg.Output == nil && strings.Contains(log, "address already in use") {
			return fmt.Errorf("node %d: %w", n.ID, ErrAddrInUse)
		}
		return fmt.Errorf("launcher: node %d exited (%s)%s", n.ID, exitText(p.ExitErr()), tailOf(log, 20))
	}
	return nil
}

func tailOf(log string, lines int) string {
	if log == "" {
		return ""
	}
	l := strings.Split(strings.TrimSpace(log), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return ":\n" + strings.Join(l, "\n")
}

// NotReady says why the cluster is not ready (see WaitReady); "" when it
// is.
func (c *Cluster) NotReady(ctx context.Context) string {
	running := 0
	for id := 1; id <= len(c.nodes); id++ {
		if !c.Running(id) {
			continue
		}
		running++
		a := c.Admin(id)
		if _, err := a.Status(ctx); err != nil {
			return fmt.Sprintf("node %d status: %v", id, err)
		}
		ci, err := a.Cluster(ctx)
		if err != nil {
			return fmt.Sprintf("node %d cluster: %v", id, err)
		}
		if len(ci.Shards) == 0 {
			return fmt.Sprintf("node %d reports no shards", id)
		}
		var leaderless []string
		for _, s := range ci.Shards {
			if l := int(s.Leader); l < 1 || l > len(c.nodes) || !c.Running(l) {
				leaderless = append(leaderless, fmt.Sprint(s.ID))
			}
		}
		if len(leaderless) > 0 {
			return fmt.Sprintf("node %d sees no running leader of shards %s", id, strings.Join(leaderless, ","))
		}
	}
	if running == 0 {
		return "no node is running"
	}
	return ""
}
