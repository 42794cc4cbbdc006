package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startTries bounds Launch's fresh starts after a port was taken between
// picking and binding it.
const startTries = 3

// Launch prepares and starts a cluster and waits (up to readyTimeout)
// until it is ready (WaitReady). When the launcher picked the ports and a
// node could not bind one (another process took it meanwhile), it starts
// the whole cluster again on fresh ports, up to three times.
func Launch(ctx context.Context, cfg Config, readyTimeout time.Duration) (*Cluster, error) {
	fixed := cfg.HTTPAddrs != nil || cfg.PeerAddrs != nil
	for try := 1; ; try++ {
		tcfg, kept := cfg, &heldExits{onExit: cfg.OnExit}
		if cfg.OnExit != nil {
			tcfg.OnExit = kept.note
		}
		c, err := New(tcfg)
		if err != nil {
			return nil, err
		}
		if err = c.StartAll(); err == nil {
			err = c.WaitReady(ctx, readyTimeout)
		}
		if err == nil {
			kept.release()
			return c, nil
		}
		c.Close()
		if fixed || try == startTries || !errors.Is(err, ErrAddrInUse) {
			return nil, err
		}
		for _, n := range c.nodes {
			if rerr := os.RemoveAll(n.Dir); rerr != nil {
				return nil, rerr
			}
		}
	}
}

// heldExits holds the exits of one of Launch's tries until the try is
// the cluster Launch returns (release), so that a node of a try given up
// (one that could not bind its port) is never reported to Config.OnExit.
type heldExits struct {
	onExit func(id int, err error)
	mu     sync.Mutex
	live   bool
	held   []func()
}

func (h *heldExits) note(id int, err error) {
	h.mu.Lock()
	if !h.live {
		h.held = append(h.held, func() { h.onExit(id, err) })
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.onExit(id, err)
}

// release reports the exits held so far and every later one at once.
func (h *heldExits) release() {
	h.mu.Lock()
	held := h.held
	h.live, h.held = true, nil
	h.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// StartAll starts every node that is not running.
func (c *Cluster) StartAll() error {
	for i := range c.nodes {
		if err := c.Start(i + 1); err != nil {
			return err
		}
	}
	return nil
}

// Start (re)starts node id on its data dir and addresses; it does nothing
// if the node is running and does not wait for readiness.
func (c *Cluster) Start(id int) error {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && n.proc.Running() {
		return nil
	}
	if n.logged != nil {
		<-n.logged // the last run has exited; its exit line is written at once
	}
	args := append([]string{"serve", "--node-id", fmt.Sprint(n.ID), "--http-addr", n.HTTPAddr,
		"--peer-addr", n.PeerAddr, "--data-dir", n.Dir}, c.args...)
	if n.EtcdAddr != "" {
		args = append(args, "--etcd-addr", n.EtcdAddr)
	}
	if c.cfg.TLS != nil {
		args = append(args, c.cfg.TLS.args(n.ID)...)
	}
	var out io.Writer
	var logf *os.File
	if c.cfg.Output != nil {
		out = c.cfg.Output(id)
	} else {
		var err error
		if logf, err = os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(logf, "=== launcher %s: starting node %d: %s %s\n", stamp(), id, c.cfg.Bin, strings.Join(args, " "))
		out = logf
	}
	var attr *syscall.SysProcAttr
	if c.cfg.SysProcAttr != nil {
		attr = c.cfg.SysProcAttr()
	}
	p, err := StartProcess(c.cfg.Bin, args, out, attr)
	if err != nil {
		if logf != nil {
			logf.Close()
		}
		return fmt.Errorf("launcher: start node %d: %w", id, err)
	}
	if c.cfg.OnStart != nil {
		if err := c.cfg.OnStart(id, p.Pid()); err != nil {
			p.Kill()
			if logf != nil {
				logf.Close()
			}
			return fmt.Errorf("launcher: node %d: %w", id, err)
		}
	}
	n.proc, n.expected, n.logged = p, false, make(chan struct{})
	go c.watch(n, p, logf, n.logged)
	return nil
}

// watch reports the end of one run of node n: it writes the exit to the
// run's log, closes logged, then tells Config.OnExit unless the launcher
// caused the exit.
func (c *Cluster) watch(n *Node, p *Process, logf *os.File, logged chan struct{}) {
	err := p.ExitErr()
	if logf != nil {
		fmt.Fprintf(logf, "=== launcher %s: node %d (pid %d) exited: %v\n", stamp(), n.ID, p.Pid(), exitText(err))
		logf.Close()
	}
	close(logged)
	n.mu.Lock()
	expected := n.expected || n.proc != p
	n.mu.Unlock()
	if !expected && c.cfg.OnExit != nil {
		c.cfg.OnExit(n.ID, err)
	}
}

func stamp() string { return time.Now().Format("15:04:05.000") }

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// signalled returns node id's running process after marking its exit as
// the launcher's doing; nil when it is not running.
func (c *Cluster) signalled(id int) *Process {
	n := c.Node(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || !n.proc.Running() {
		return nil
	}
	n.expected = true
	return n.proc
}

// Stop sends SIGTERM to node id and waits up to Config.StopTimeout for it
// to exit, then kills it (the error wraps ErrKilled). It returns an error
// when the node did not exit with status 0; nil when it was not running.
func (c *Cluster) Stop(id int) error {
	p := c.signalled(id)
	if p == nil {
		return nil
	}
	if err := p.Stop(c.cfg.StopTimeout); err != nil {
		return fmt.Errorf("launcher: stop node %d: %w", id, err)
	}
	return nil
}

// StopAll stops every running node at once, each with its own bounded
// wait (Stop), and returns their errors joined.
func (c *Cluster) StopAll() error {
	return c.each(c.Stop)
}

// Kill sends SIGKILL to node id and waits for it to exit.
func (c *Cluster) Kill(id int) {
	if p := c.signalled(id); p != nil {
		p.Kill()
	}
}

// Restart stops node id (Stop) and starts it again.
func (c *Cluster) Restart(id int) error {
	serr := c.Stop(id)
	if err := c.Start(id); err != nil {
		return err
	}
	return serr
}

// Pause stops node id with SIGSTOP; Resume continues it. Both do nothing
// when the node is not running.
func (c *Cluster) Pause(id int) error {
	if p := c.proc(id); p != nil {
		return p.Pause()
	}
	return nil
}

// Resume continues node id after Pause.
func (c *Cluster) Resume(id int) error {
	if p := c.proc(id); p != nil {
		return p.Resume()
	}
	return nil
}

// Close kills every node at once (SIGKILL, no clean stop).
func (c *Cluster) Close() {
	_ = c.each(func(id int) error { c.Kill(id); return nil })
}

// each runs f on every node concurrently.
func (c *Cluster) each(f func(id int) error) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i + 1)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
