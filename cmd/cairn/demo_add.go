package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/launcher"
)

// runDemoAddNode starts one more node that joins the demo running at
// --host:--http-port, under the next unused node id, and runs it until
// Ctrl-C. The balancer then moves replicas onto it.
func runDemoAddNode(ctx context.Context, o demoOpts, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	seed := "http://" + net.JoinHostPort(o.host, fmt.Sprint(o.httpPort))
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	nodes, err := client.NewAdmin(seed, nil).Nodes(actx)
	cancel()
	if err != nil {
		return fmt.Errorf("no demo answers at %s (start `cairn demo` first, or pass its --http-port): %w", seed, err)
	}
	id := uint64(1)
	if len(nodes.UsedIDs) > 0 {
		id = slices.Max(nodes.UsedIDs) + 1
	}
	httpAddr := net.JoinHostPort(o.host, fmt.Sprint(o.httpPort+int(id)-1))
	peerAddr := net.JoinHostPort(o.host, fmt.Sprint(o.httpPort+1000+int(id)-1))
	if !portFree(httpAddr) || !portFree(peerAddr) {
		addrs, err := launcher.FreeAddrs([]string{o.host, o.host})
		if err != nil {
			return err
		}
		httpAddr, peerAddr = addrs[0], addrs[1]
	}
	dir := filepath.Join(o.dataDir, fmt.Sprintf("node-%d", id))
	args := []string{"serve", "--node-id", fmt.Sprint(id), "--join", seed, "--http-addr", httpAddr,
		"--peer-addr", peerAddr, "--data-dir", dir, "--log-format", o.logFormat}
	var mu sync.Mutex
	p, err := launcher.StartProcess(exe, args, &lineWriter{prefix: fmt.Sprintf("[node-%d] ", id), w: stderr, mu: &mu}, nil)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := waitStatus(ctx, "http://"+httpAddr, p, sig); err != nil {
		_ = p.Stop(demoStopTimeout)
		return err
	}
	fmt.Fprintf(stdout, `Node %[1]d joined the demo: http://%[2]s (peer %[3]s), data in %[4]s

The balancer moves replicas onto it; watch with:
  cairn admin --endpoint %[5]s node list
Restart it later with:
  %[6]s
Drain and remove it with:
  cairn admin --endpoint %[5]s node decommission %[1]d

Ctrl-C stops this node.
`, id, httpAddr, peerAddr, dir, seed, "cairn "+strings.Join(slices.Delete(slices.Clone(args), 3, 5), " "))
	select {
	case s := <-sig:
		fmt.Fprintf(stderr, "demo: %s: stopping node %d\n", s, id)
		return p.Stop(demoStopTimeout)
	case <-p.Done():
		return fmt.Errorf("node %d exited: %v", id, exitDesc(p.ExitErr()))
	}
}

func portFree(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// waitStatus waits until the node at base answers GET /v1/status.
func waitStatus(ctx context.Context, base string, p *launcher.Process, sig <-chan os.Signal) error {
	deadline := time.Now().Add(90 * time.Second)
	a := client.NewAdmin(base, nil)
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := a.Status(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("the new node exited: %v", exitDesc(p.ExitErr()))
		case s := <-sig:
			return fmt.Errorf("interrupted by %s while joining", s)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the new node did not answer at %s within 90s: %w", base, err)
		}
	}
}
