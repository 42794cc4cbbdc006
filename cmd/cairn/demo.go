package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

type demoOpts struct {
	nodes, httpPort, peerPort int
	dataDir, host             string
	shards, replication       int
	logFormat                 string
}

func newDemoCmd() *cobra.Command {
	var o demoOpts
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local cluster (default three nodes on 127.0.0.1:8080-8082)",
		Long: `Start a local Cairn cluster as child processes of this command, wait until
every shard has a leader, print the endpoints and a curl example, and stop
every node cleanly on Ctrl-C or SIGTERM. Running it again with the same
--data-dir brings the same data back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.logFormat, _ = cmd.Flags().GetString("log-format")
			if o.httpPort < 1 || o.httpPort+o.nodes-1 > 65535 {
				return usageError{fmt.Errorf("--http-port: nodes would use ports %d-%d", o.httpPort, o.httpPort+o.nodes-1)}
			}
			if o.replication == 0 {
				o.replication = min(3, o.nodes)
			}
			if o.nodes < 1 || o.nodes > 64 {
				return usageError{fmt.Errorf("--nodes must be in [1, 64]")}
			}
			return runDemo(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.nodes, "nodes", 3, "number of nodes")
	f.IntVar(&o.httpPort, "http-port", 8080, "HTTP port of the first node; node i uses http-port+i")
	f.IntVar(&o.peerPort, "peer-port", 0, "peer port of the first node (default: the ports of an earlier run of this data dir, else http-port+1000 when free, else any free ports)")
	f.StringVar(&o.dataDir, "data-dir", "./cairn-data", "data directory; node i uses DIR/node-<i>")
	f.StringVar(&o.host, "host", "127.0.0.1", "address to listen on")
	f.IntVar(&o.shards, "shards", 0, "shards at bootstrap (0: one per node)")
	f.IntVar(&o.replication, "replication", 0, "replicas per shard (default min(3, nodes))")
	return cmd
}

// demoPeersFile, in the data dir, keeps the peer addresses a demo cluster
// was bootstrapped with: its nodes persist them, so a later run must use the
// same ones.
const demoPeersFile = "demo-peers"

// demoPeers chooses the nodes' peer addresses: --peer-port if given; else
// those of an earlier run of the data dir; else http-port+1000… when all
// are free; else free ports the system picks. It records the choice.
func demoPeers(o demoOpts) ([]string, error) {
	file := filepath.Join(o.dataDir, demoPeersFile)
	var peers []string
	if o.peerPort == 0 {
		if b, err := os.ReadFile(file); err == nil {
			peers = strings.Fields(string(b))
			if len(peers) != o.nodes {
				return nil, fmt.Errorf("%s was made by a %d-node demo; use --nodes %d or another --data-dir", file, len(peers), len(peers))
			}
			return peers, nil
		}
	}
	port := o.peerPort
	if port == 0 {
		port = o.httpPort + 1000
	}
	free := port+o.nodes-1 <= 65535
	for i := 0; i < o.nodes && free; i++ {
		peers = append(peers, net.JoinHostPort(o.host, fmt.Sprint(port+i)))
		l, err := net.Listen("tcp", peers[i])
		if err != nil {
			free = false
			break
		}
		l.Close()
	}
	switch {
	case free:
	case o.peerPort != 0:
		return nil, fmt.Errorf("--peer-port: ports %d-%d are not all free", o.peerPort, o.peerPort+o.nodes-1)
	default:
		peers = peers[:0]
		for i := 0; i < o.nodes; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort(o.host, "0"))
			if err != nil {
				return nil, err
			}
			peers = append(peers, l.Addr().String())
			defer l.Close()
		}
	}
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(strings.Join(peers, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return peers, nil
}

type demoNode struct {
	id       int
	httpAddr string
	peerAddr string
	cmd      *exec.Cmd
	exited   chan struct{}
}

func runDemo(ctx context.Context, o demoOpts, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	peers, err := demoPeers(o)
	if err != nil {
		return err
	}
	nodes := make([]*demoNode, o.nodes)
	var cluster []string
	for i := range nodes {
		n := &demoNode{id: i + 1,
			httpAddr: net.JoinHostPort(o.host, fmt.Sprint(o.httpPort+i)),
			peerAddr: peers[i],
			exited:   make(chan struct{})}
		for _, addr := range []string{n.httpAddr, n.peerAddr} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("port %s is not free (another demo running? choose --http-port): %w", addr, err)
			}
			l.Close()
		}
		nodes[i] = n
		cluster = append(cluster, fmt.Sprintf("%d=%s", n.id, n.peerAddr))
	}
	var outMu sync.Mutex
	var exits sync.WaitGroup
	stopping := make(chan struct{})
	for _, n := range nodes {
		dir := filepath.Join(o.dataDir, fmt.Sprintf("node-%d", n.id))
		n.cmd = exec.Command(exe, "serve", "--log-format", o.logFormat,
			"--node-id", fmt.Sprint(n.id), "--http-addr", n.httpAddr, "--peer-addr", n.peerAddr,
			"--initial-cluster", strings.Join(cluster, ","), "--data-dir", dir,
			"--shards", fmt.Sprint(o.shards), "--replication", fmt.Sprint(o.replication))
		pr, pw := io.Pipe()
		n.cmd.Stdout, n.cmd.Stderr = pw, pw
		if err := n.cmd.Start(); err != nil {
			stopNodes(nodes)
			return fmt.Errorf("start node %d: %w", n.id, err)
		}
		go prefixLines(pr, fmt.Sprintf("[node-%d] ", n.id), stderr, &outMu)
		exits.Add(1)
		go func(n *demoNode, pw *io.PipeWriter) {
			defer exits.Done()
			err := n.cmd.Wait()
			pw.Close()
			close(n.exited)
			select {
			case <-stopping:
			default:
				outMu.Lock()
				fmt.Fprintf(stderr, "demo: node %d exited unexpectedly: %v\n", n.id, exitDesc(err))
				outMu.Unlock()
			}
		}(n, pw)
	}
	allExited := make(chan struct{})
	go func() { exits.Wait(); close(allExited) }()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)

	if err := waitDemoReady(nodes, 30*time.Second, sig); err != nil {
		close(stopping)
		stopNodes(nodes)
		return err
	}
	printEndpoints(stdout, o, nodes)
	select {
	case s := <-sig:
		fmt.Fprintf(stderr, "demo: %s: stopping %d nodes\n", s, len(nodes))
		close(stopping)
		stopNodes(nodes)
		return nil
	case <-allExited:
		return errors.New("every node exited")
	}
}

func exitDesc(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func prefixLines(r io.Reader, prefix string, w io.Writer, mu *sync.Mutex) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mu.Lock()
		fmt.Fprintln(w, prefix+sc.Text())
		mu.Unlock()
	}
}

// stopNodes sends SIGTERM to every running node and SIGKILLs those still
// running after 10 s.
func stopNodes(nodes []*demoNode) {
	for _, n := range nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(10 * time.Second)
	for _, n := range nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-deadline:
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
}

// waitDemoReady polls until every node answers /v1/status and node 1 sees
// a leader for every shard.
func waitDemoReady(nodes []*demoNode, timeout time.Duration, sig <-chan os.Signal) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	missing := "nothing checked yet"
	for time.Now().Before(deadline) {
		missing = demoMissing(hc, nodes)
		if missing == "" {
			return nil
		}
		select {
		case s := <-sig:
			return fmt.Errorf("interrupted by %s while starting", s)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("cluster not ready after %v: %s", timeout, missing)
}

func demoMissing(hc *http.Client, nodes []*demoNode) string {
	for _, n := range nodes {
		select {
		case <-n.exited:
			return fmt.Sprintf("node %d exited", n.id)
		default:
		}
		resp, err := hc.Get("http://" + n.httpAddr + "/v1/status")
		if err != nil {
			return fmt.Sprintf("node %d: %v", n.id, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("node %d: status %d", n.id, resp.StatusCode)
		}
	}
	resp, err := hc.Get("http://" + nodes[0].httpAddr + "/v1/cluster")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var ci struct {
		Shards []struct {
			ID     uint64 `json:"id"`
			Leader uint64 `json:"leader"`
		} `json:"shards"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ci); err != nil {
		return "cluster: " + err.Error()
	}
	var leaderless []string
	for _, s := range ci.Shards {
		if s.Leader == 0 {
			leaderless = append(leaderless, fmt.Sprint(s.ID))
		}
	}
	if len(ci.Shards) == 0 || len(leaderless) > 0 {
		return "shards without a leader: " + strings.Join(leaderless, ",")
	}
	return ""
}

func printEndpoints(w io.Writer, o demoOpts, nodes []*demoNode) {
	shards := o.shards
	if shards == 0 {
		shards = len(nodes)
	}
	fmt.Fprintf(w, "Cairn demo: %d nodes, %d shards, replication %d, data in %s\n\n", len(nodes), shards, o.replication, o.dataDir)
	for _, n := range nodes {
		fmt.Fprintf(w, "  node %d   http://%s   (peer %s)\n", n.id, n.httpAddr, n.peerAddr)
	}
	a := "http://" + nodes[0].httpAddr
	b := "http://" + nodes[len(nodes)-1].httpAddr
	fmt.Fprintf(w, `
Try:
  curl -i -X PUT --data-binary 'hello' '%[1]s/v0/entity?id=k1'
  curl -i '%[2]s/v0/entity?id=k1'
  curl -i -X PUT --data-binary 'world' %[1]s/v1/kv/greeting
  curl -i %[2]s/v1/kv/greeting
  curl -s %[1]s/v1/cluster

Ctrl-C stops every node.
`, a, b)
}
