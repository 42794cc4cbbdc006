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
// workload runs. Healing reports how many replicas it holds; the node is
// stopped with the cluster.
type joinFault struct{}

func (joinFault) Kind() string  { return "add-node" }
func (joinFault) Param() string { return "" }

func (joinFault) Inject(c *Cluster, n int) error {
	if c.TLS() != nil {
		return fmt.Errorf("%w: add-node with --secure", ErrUnsupported)
	}
	addrs, err := launcher.FreeAddrs([]string{"127.0.0.1", "127.0.0.1"})
	if err != nil {
		return err
	}
	id := c.Size() + 1 + c.extraCount()
	dir := filepath.Join(c.Dir(), fmt.Sprint("node-", id))
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return err
	}
	p, err := launcher.StartProcess(c.Bin(), []string{"serve", "--node-id", fmt.Sprint(id), "--join", c.URL(n),
		"--http-addr", addrs[0], "--peer-addr", addrs[1], "--data-dir", dir}, logf, nil)
	if err != nil {
		logf.Close()
		return err
	}
	c.addExtra(extraNode{id: id, url: "http://" + addrs[0], proc: p, log: logf})
	// Joined once its client port answers.
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second} // a node that accepts but never answers does not hold the run
	for {
		resp, err := hc.Get("http://" + addrs[0] + "/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				c.Notef("node %d joined through node %d", id, n)
				return nil
			}
		}
		if !p.Running() || time.Now().After(deadline) {
			return fmt.Errorf("node %d did not join within 30 s (its log: %s)", id, dir+".log")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Heal reports the share of replicas the joined node took.
func (joinFault) Heal(c *Cluster, n int) error {
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

// extraNode is a node a fault started outside the launcher.
type extraNode struct {
	id   int
	url  string
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
