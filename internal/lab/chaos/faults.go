package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
)

// Fault is one kind of failure, injected into and healed from a node.
type Fault interface {
	Kind() string
	// Param describes the fault's setting (quota, limit, …), or "".
	Param() string
	Inject(c *Cluster, node int) error
	Heal(c *Cluster, node int) error
}

// ErrUnsupported is returned when the machine cannot inject a fault (no
// writable cgroup hierarchy, for example).
var ErrUnsupported = errors.New("chaos: fault not supported on this machine")

type killFault struct{}

func (killFault) Kind() string                   { return "kill" }
func (killFault) Param() string                  { return "" }
func (killFault) Inject(c *Cluster, n int) error { c.Kill(n); return nil }
func (killFault) Heal(c *Cluster, n int) error   { return c.Start(n) }

type pauseFault struct{}

func (pauseFault) Kind() string                   { return "pause" }
func (pauseFault) Param() string                  { return "" }
func (pauseFault) Inject(c *Cluster, n int) error { return c.Pause(n) }
func (pauseFault) Heal(c *Cluster, n int) error   { return c.Resume(n) }

// restartFault stops a node cleanly (SIGTERM) and starts it again.
type restartFault struct{}

func (restartFault) Kind() string  { return "restart" }
func (restartFault) Param() string { return "" }
func (restartFault) Inject(c *Cluster, n int) error {
	if err := c.Stop(n); err != nil {
		c.Notef("%v", err) // killed after its bound, or a non-zero exit: still stopped
	}
	return nil
}
func (restartFault) Heal(c *Cluster, n int) error { return c.Start(n) }

// partitionFault isolates a node from every other, both ways (through
// iptables or the nodes' fault hooks: Cluster.PartitionMechanism).
type partitionFault struct{}

func (partitionFault) Kind() string  { return "partition" }
func (partitionFault) Param() string { return "isolate" }
func (partitionFault) Inject(c *Cluster, n int) error {
	var others []int
	for i := range c.Size() {
		if i+1 != n {
			others = append(others, i+1)
		}
	}
	c.Notef("node %d cut from %s via %s", n, joinInts(others), c.PartitionMechanism())
	return c.cut([]int{n}, others)
}
func (partitionFault) Heal(c *Cluster, n int) error { return c.healCuts() }

// splitFault cuts the cluster in two: a minority with the target node and
// a majority with the rest (splitSides).
type splitFault struct{}

func (splitFault) Kind() string  { return "partition" }
func (splitFault) Param() string { return "split" }
func (splitFault) Inject(c *Cluster, n int) error {
	minority, majority, err := splitSides(c.Size(), n)
	if err != nil {
		return err
	}
	c.Notef("minority %s | majority %s via %s", joinInts(minority), joinInts(majority), c.PartitionMechanism())
	return c.cut(minority, majority)
}
func (splitFault) Heal(c *Cluster, n int) error { return c.healCuts() }

// splitSides divides nodes 1..n into a minority of floor((n-1)/2) nodes
// (at least one) made of the target and the nodes after it (wrapping
// around), and a majority of the others: 1 vs 2 of 3 nodes (the target
// isolated), 1 vs 3 of 4, 2 vs 3 of 5, 3 vs 4 of 7. Both sides are sorted.
func splitSides(n, target int) (minority, majority []int, err error) {
	if n < 2 || target < 1 || target > n {
		return nil, nil, fmt.Errorf("chaos: cannot split %d node(s) around node %d", n, target)
	}
	size := max(1, (n-1)/2)
	in := map[int]bool{}
	for i := 0; i < size; i++ {
		in[(target-1+i)%n+1] = true
	}
	for node := 1; node <= n; node++ {
		if in[node] {
			minority = append(minority, node)
		} else {
			majority = append(majority, node)
		}
	}
	return minority, majority, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// diskStallFault delays every storage commit of the node.
type diskStallFault struct{ delay time.Duration }

func (f diskStallFault) Kind() string  { return "disk-stall" }
func (f diskStallFault) Param() string { return f.delay.String() }
func (f diskStallFault) Inject(c *Cluster, n int) error {
	return c.admin(n, func(ctx context.Context, a *client.Admin) error { return a.DiskStall(ctx, f.delay) })
}
func (f diskStallFault) Heal(c *Cluster, n int) error {
	return c.admin(n, func(ctx context.Context, a *client.Admin) error { return a.DiskStall(ctx, 0) })
}

// clockFault shifts the node's clocks (wall and monotonic, through its
// fault hook; the machine's clock is never touched). A skew sets the
// offset to by while the fault lasts and back to 0 when it heals (a step
// forward, then one back); a jump moves the clocks by by once and leaves
// them there (healing is a no-op; the run's final heal resets them).
type clockFault struct {
	by   time.Duration
	jump bool
}

func (f clockFault) Kind() string {
	if f.jump {
		return "clock-jump"
	}
	return "clock-skew"
}
func (f clockFault) Param() string { return f.by.String() }
func (f clockFault) Inject(c *Cluster, n int) error {
	return c.admin(n, func(ctx context.Context, a *client.Admin) error {
		if f.jump {
			return a.ClockJump(ctx, f.by)
		}
		return a.ClockSkew(ctx, f.by)
	})
}
func (f clockFault) Heal(c *Cluster, n int) error {
	if f.jump {
		return nil
	}
	return c.admin(n, func(ctx context.Context, a *client.Admin) error { return a.ClockSkew(ctx, 0) })
}
