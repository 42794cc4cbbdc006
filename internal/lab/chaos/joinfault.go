package chaos

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// joinFault starts one more node that joins the running cluster through
// the target node (`cairn serve --join`) and leaves it running: the
// cluster's balancer moves a share of the replicas onto it while the
// workload runs. The fault is settled (FaultResult.SettledMs) once the
// new node holds its share and no shard has a move in flight. Healing
// reports how many replicas it holds; the node is stopped with the
// cluster.
type joinFault struct{ watch *settleWatch }

func (*joinFault) Kind() string  { return "add-node" }
func (*joinFault) Param() string { return "" }

func (f *joinFault) Inject(c *Cluster, n int) error {
	id, err := c.joinNode(n)
	if err != nil {
		return err
	}
	f.watch = c.watchSettle(func() bool { return c.holdsShare(id) })
	return nil
}

// Heal reports the share of replicas the joined node took.
func (f *joinFault) Heal(c *Cluster, n int) error {
	if f.watch != nil {
		f.watch.end()
	}
	ci, err := c.Info(n)
	if err != nil {
		return err
	}
	for _, x := range c.extraNodes() {
		held, all := 0, 0
		for _, s := range ci.Shards {
			all += len(s.Replicas)
			if s.HasReplica(uint64(x.id)) {
				held++
			}
		}
		c.Notef("node %d holds %d of %d replicas", x.id, held, all)
		if held == 0 {
			return fmt.Errorf("node %d joined but holds no replica", x.id)
		}
	}
	return nil
}

// joinNode starts a new node (the next unused id) that joins the cluster
// through node via, with the serve flags extra, and waits until its
// client port answers (30 s at most). It returns the new node's id.
func (c *Cluster) joinNode(via int, extra ...string) (int, error) {
	if c.TLS() != nil {
		return 0, fmt.Errorf("%w: a joining node with --secure", ErrUnsupported)
	}
	addrs, err := launcher.FreeAddrs([]string{"127.0.0.1", "127.0.0.1"})
	if err != nil {
		return 0, err
	}
	id := c.Size() + 1 + c.extraCount()
	dir := filepath.Join(c.Dir(), fmt.Sprint("node-", id))
	x := extraNode{id: id, url: "http://" + addrs[0], dir: dir,
		args: []string{"serve", "--node-id", fmt.Sprint(id), "--http-addr", addrs[0], "--peer-addr", addrs[1], "--data-dir", dir}}
	x.args = append(x.args, extra...)
	if x.log, err = os.Create(dir + ".log"); err != nil {
		return 0, err
	}
	if x.proc, err = launcher.StartProcess(c.Bin(), append(x.args, "--join", c.URL(via)), x.log, nil); err != nil {
		x.log.Close()
		return 0, err
	}
	c.addExtra(x)
	if err := c.waitAnswers(x, 30*time.Second); err != nil {
		return 0, err
	}
	c.Notef("node %d joined through node %d", id, via)
	return id, nil
}

// waitAnswers waits until the extra node's client port answers.
func (c *Cluster) waitAnswers(x extraNode, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second} // a node that accepts but never answers does not hold the run
	for {
		resp, err := hc.Get(x.url + "/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !x.proc.Running() || time.Now().After(deadline) {
			return fmt.Errorf("node %d did not answer within %v (its log: %s)", x.id, timeout, x.dir+".log")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// extraNode is a node a fault started outside the launcher.
type extraNode struct {
	id   int
	url  string
	dir  string
	args []string // its serve command line without --join (a restart's)
	proc *launcher.Process
	log  *os.File
}

func (c *Cluster) addExtra(x extraNode) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	c.extra = append(c.extra, x)
}

func (c *Cluster) extraNodes() []extraNode {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	return append([]extraNode(nil), c.extra...)
}

func (c *Cluster) extraCount() int { return len(c.extraNodes()) }

// stopExtra stops the nodes faults started.
func (c *Cluster) stopExtra() {
	for _, x := range c.extraNodes() {
		_ = x.proc.Stop(10 * time.Second)
		x.log.Close()
	}
}
