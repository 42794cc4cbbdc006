package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/client"
)

// The elastic scenario is issue 14's acceptance run as one command: on a
// cluster holding the preloaded records under the register load, a new
// node joins and must hold its share of the replicas within
// elasticBalanceLimit of joining, then serve a read of every preloaded
// record; then node 1 is decommissioned and must drain, leave the
// membership and exit while the load still runs. The run's usual checks
// (linearizable, no acknowledged write lost, none applied twice, replicas
// converged) apply, and every client error fails it (the Go client
// retries, so a user sees none).

// Bounds of the elastic scenario.
const (
	elasticBalanceLimit = 5 * time.Minute // from the join to the new node holding its share
	elasticReaders      = 64              // concurrent readers of the preloaded records through the new node
)

// ElasticCheck is what the elastic scenario measured and found wrong.
type ElasticCheck struct {
	// Joined is the node that joined and Drained the node decommissioned.
	Joined  int `json:"joined"`
	Drained int `json:"drained"`
	// BalanceMs is the time from the join to the moment the new node held
	// its share with no move in flight (-1: not within
	// elasticBalanceLimit); Held of Replicas is the replicas it held then
	// (voters of every shard), Active the active nodes. Its share is
	// Replicas/Active, rounded down or up.
	BalanceMs int64 `json:"balance_ms"`
	Held      int   `json:"held"`
	Replicas  int   `json:"replicas"`
	Active    int   `json:"active"`
	// KeysRead of Keys preloaded records were read (linearizably) through
	// the new node alone; KeysMissing answered not found, ReadErrors
	// failed after the client's retries. ReadMs is how long reading them
	// all took.
	Keys        uint64 `json:"keys"`
	KeysRead    uint64 `json:"keys_read"`
	KeysMissing uint64 `json:"keys_missing"`
	ReadErrors  uint64 `json:"read_errors"`
	FirstBad    string `json:"first_bad,omitempty"`
	ReadMs      int64  `json:"read_ms"`
	// DrainMs is the time from the decommission call to the moment no
	// live node listed the drained node as a replica holder or member
	// (-1: not seen); ExitMs to the moment it had exited.
	DrainMs int64 `json:"drain_ms"`
	ExitMs  int64 `json:"exit_ms"`
	// LoadRan: the register load still ran when the drain ended.
	LoadRan bool `json:"load_ran"`
	// Problems are the checks that failed (each also the error of the
	// step that found it, which fails the run).
	Problems []string `json:"problems,omitempty"`
}

// Failures are what fails the run besides the steps' errors: any client
// error (clientErrors, all kinds together; the Go client retries, so a
// user must see none).
func (e *ElasticCheck) Failures(clientErrors uint64) []string {
	if clientErrors > 0 {
		return []string{fmt.Sprintf("%d client-visible errors (want 0)", clientErrors)}
	}
	return nil
}

// elasticState is the scenario's check under way (Cluster.elastic).
type elasticState struct {
	mu     sync.Mutex
	check  *ElasticCheck
	joinAt time.Time
}

func (c *Cluster) elasticCheck() *ElasticCheck {
	c.elastic.mu.Lock()
	defer c.elastic.mu.Unlock()
	if c.elastic.check == nil {
		c.elastic.check = &ElasticCheck{BalanceMs: -1, DrainMs: -1, ExitMs: -1}
	}
	return c.elastic.check
}

func (c *Cluster) elasticProblem(format string, args ...any) {
	e := c.elasticCheck()
	c.elastic.mu.Lock()
	e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
	c.elastic.mu.Unlock()
}

// elasticJoinFault: a new node joins through a node other than the
// target (which the next step decommissions); healing waits until it
// holds its share (elasticBalanceLimit from the join at most), then
// reads every preloaded record through it.
type elasticJoinFault struct {
	id    int
	watch *settleWatch
}

func (*elasticJoinFault) Kind() string  { return "elastic-join" }
func (*elasticJoinFault) Param() string { return "" }

func (f *elasticJoinFault) Inject(c *Cluster, n int) error {
	e := c.elasticCheck()
	t0 := time.Now() // the join's clock starts with the new process
	id, err := c.joinNode(other(c, n))
	if err != nil {
		c.elasticProblem("join: %v", err)
		return err
	}
	f.id = id
	c.elastic.mu.Lock()
	e.Joined, c.elastic.joinAt = id, t0
	c.elastic.mu.Unlock()
	f.watch = c.watchSettle(func() bool { return c.shareWithin(id) == "" })
	return nil
}

func (f *elasticJoinFault) Heal(c *Cluster, n int) error {
	if f.id == 0 {
		return nil
	}
	e := c.elasticCheck()
	joinAt := c.elastic.joinAt
	why := waitFor(time.Until(joinAt.Add(elasticBalanceLimit)), func() string { return c.shareWithin(f.id) })
	if why == "" {
		f.watch.endSeen(c)
	} else {
		f.watch.end()
	}
	c.notesMu.Lock()
	settled := c.settled
	c.notesMu.Unlock()
	if why != "" {
		c.elasticProblem("node %d did not hold its share within %v of joining: %s", f.id, elasticBalanceLimit, why)
		return fmt.Errorf("not balanced within %v: %s", elasticBalanceLimit, why)
	}
	ci, err := c.anyInfo()
	if err != nil {
		return err
	}
	held, voters, active := shareOf(ci, uint64(f.id))
	c.elastic.mu.Lock()
	e.BalanceMs = settled.Sub(joinAt).Milliseconds()
	e.Held, e.Replicas, e.Active = held, voters, active
	c.elastic.mu.Unlock()
	c.Notef("node %d held %d of %d replicas (%d active nodes) %.1fs after joining", f.id, held, voters, active, float64(e.BalanceMs)/1000)
	return c.readAllThrough(f.id, e)
}

// readAllThrough reads every preloaded record through node id alone
// (linearizable reads, elasticReaders at a time) and records what it found.
func (c *Cluster) readAllThrough(id int, e *ElasticCheck) error {
	p := c.preload
	if p.Keys == 0 {
		c.Notef("no preloaded records to read through node %d", id)
		return nil
	}
	x, ok := c.extraNode(id)
	if !ok {
		return fmt.Errorf("node %d is not a node the run started", id)
	}
	cl, err := client.New([]string{x.url}, c.clientOptions(10*time.Second))
	if err != nil {
		return err
	}
	t0 := time.Now()
	var next, read, missing, failed atomic.Uint64
	var firstMu sync.Mutex
	first := ""
	bad := func(k []byte, why string) {
		firstMu.Lock()
		if first == "" {
			first = fmt.Sprintf("%q: %s", k, why)
		}
		firstMu.Unlock()
	}
	var wg sync.WaitGroup
	for range elasticReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= p.Keys {
					return
				}
				k := p.Key(i)
				_, err := cl.Get(context.Background(), k, false)
				switch {
				case err == nil:
					read.Add(1)
				case errors.Is(err, client.ErrNotFound):
					missing.Add(1)
					bad(k, "not found")
				default:
					failed.Add(1)
					bad(k, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	c.elastic.mu.Lock()
	e.Keys, e.KeysRead, e.KeysMissing, e.ReadErrors, e.FirstBad = p.Keys, read.Load(), missing.Load(), failed.Load(), first
	e.ReadMs = time.Since(t0).Milliseconds()
	c.elastic.mu.Unlock()
	c.Notef("read %d of %d preloaded records through node %d in %.1fs (%d not found, %d errors)",
		read.Load(), p.Keys, id, time.Since(t0).Seconds(), missing.Load(), failed.Load())
	if read.Load() != p.Keys {
		c.elasticProblem("node %d served %d of %d preloaded records (%d not found, %d errors; first %s)", id, read.Load(), p.Keys, missing.Load(), failed.Load(), first)
		return fmt.Errorf("node %d served %d of %d preloaded records (first bad %s)", id, read.Load(), p.Keys, first)
	}
	return nil
}

// elasticDrainFault decommissions the target (which the join step left
// alone) and waits for it to drain, leave and exit: a decommissionFault
// without its own join, recording its figures in the elastic check.
type elasticDrainFault struct {
	inner decommissionFault
	at    time.Time
}

func (*elasticDrainFault) Kind() string  { return "elastic-drain" }
func (*elasticDrainFault) Param() string { return "" }

func (f *elasticDrainFault) Inject(c *Cluster, n int) error {
	e := c.elasticCheck()
	c.elastic.mu.Lock()
	e.Drained = n
	c.elastic.mu.Unlock()
	f.at = time.Now()
	f.inner.noJoin = true
	if err := f.inner.Inject(c, n); err != nil {
		c.elasticProblem("decommission: %v", err)
		return err
	}
	return nil
}

func (f *elasticDrainFault) Heal(c *Cluster, n int) error {
	if f.at.IsZero() {
		return nil
	}
	err := f.inner.Heal(c, n)
	e := c.elasticCheck()
	c.notesMu.Lock()
	settled := c.settled
	c.notesMu.Unlock()
	c.elastic.mu.Lock()
	if !settled.IsZero() {
		e.DrainMs = settled.Sub(f.at).Milliseconds()
	}
	if err == nil {
		e.ExitMs = time.Since(f.at).Milliseconds()
	}
	e.LoadRan = c.loadEnd.IsZero() || time.Now().Before(c.loadEnd) // zero: the load runs until the steps end
	c.elastic.mu.Unlock()
	if err != nil {
		c.elasticProblem("drain of node %d: %v", n, err)
		return err
	}
	c.Notef("node %d drained %.1fs after the decommission call", n, float64(e.DrainMs)/1000)
	if !e.LoadRan {
		c.elasticProblem("the load ended before node %d had drained and exited", n)
		return fmt.Errorf("the load ended before the drain did: raise --duration")
	}
	return nil
}

// shareWithin says why node does not hold its share of the replicas as
// a live node sees the cluster (shareWithinProblem); "" when it does.
func (c *Cluster) shareWithin(node int) string {
	ci, err := c.anyInfo()
	if err != nil {
		return err.Error()
	}
	return shareWithinProblem(ci, uint64(node))
}

// shareWithinProblem says why node does not hold its share of the
// replicas in ci within rounding: at least shareProblem's floor of the
// voters divided by the active members and at most its ceiling, with no
// move in flight. "": it does.
func shareWithinProblem(ci client.ClusterInfo, node uint64) string {
	if why := shareProblem(ci, node); why != "" {
		return why
	}
	held, voters, active := shareOf(ci, node)
	if up := (voters + active - 1) / active; held > up {
		return fmt.Sprintf("node %d holds %d replicas, above its share of %d (%d voters, %d active nodes)", node, held, up, voters, active)
	}
	return ""
}

// shareOf counts node's replicas, every shard's voters and the active
// members in ci.
func shareOf(ci client.ClusterInfo, node uint64) (held, voters, active int) {
	for _, s := range ci.Shards {
		voters += len(s.Replicas)
		if s.HasReplica(node) {
			held++
		}
	}
	for _, m := range ci.Members {
		if m.State == "" || m.State == "active" {
			active++
		}
	}
	return held, voters, max(active, 1)
}
