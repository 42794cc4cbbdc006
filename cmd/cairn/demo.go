package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/lab/launcher"
	"github.com/spf13/cobra"
)

type demoOpts struct {
	nodes, httpPort, peerPort int
	dataDir, host             string
	shards, replication       int
	logFormat                 string
	// secure runs the nodes with TLS on both ports (certificates under
	// DIR/certs, made on the first secure run).
	secure bool
	// auth starts the nodes with --auth and prints the first admin token.
	auth    bool
	addNode bool
}

func newDemoCmd() *cobra.Command {
	var o demoOpts
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local cluster (default three nodes on 127.0.0.1:8080-8082)",
		Long: `Start a local Cairn cluster as child processes of this command, wait until
every shard has a leader, print the endpoints and a curl example, and stop
every node cleanly on Ctrl-C or SIGTERM. Running it again with the same
--data-dir brings the same data back. With --secure the nodes speak HTTPS
to clients and mutual TLS to each other, with a CA and certificates made
under DIR/certs on the first secure run (and reused after).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.logFormat, _ = cmd.Flags().GetString("log-format")
			if o.httpPort < 1 || o.httpPort+o.nodes-1 > 65535 {
				return usageError{fmt.Errorf("--http-port: nodes would use ports %d-%d", o.httpPort, o.httpPort+o.nodes-1)}
			}
			if o.nodes < 1 || o.nodes > 64 {
				return usageError{fmt.Errorf("--nodes must be in [1, 64]")}
			}
			if o.addNode {
				return runDemoAddNode(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
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
	f.BoolVar(&o.auth, "auth", false, "start the nodes with --auth (bearer tokens with roles) and print the first admin token")
	f.BoolVar(&o.secure, "secure", false, "TLS on both ports: HTTPS for clients and mutual TLS between nodes, with a CA and certificates made (once) under DIR/certs")
	f.BoolVar(&o.addNode, "add-node", false, "start one more node that joins the demo running at --http-port (run it in another terminal)")
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
		hosts := make([]string, o.nodes)
		for i := range hosts {
			hosts[i] = o.host
		}
		var err error
		if peers, err = launcher.FreeAddrs(hosts); err != nil {
			return nil, err
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

// demoExtra are the serve flags of every demo node.
func demoExtra(o demoOpts) []string {
	extra := []string{"--log-format", o.logFormat}
	if o.auth {
		extra = append(extra, "--auth")
	}
	return extra
}

// printAdminToken prints the first admin token once node 1 has made it
// (on the first run with --auth; later runs point at its file).
func printAdminToken(w io.Writer, c *launcher.Cluster) {
	file := filepath.Join(c.Node(1).Dir, "admin-token")
	var tok []byte
	for i := 0; i < 100; i++ {
		var err error
		if tok, err = os.ReadFile(file); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	curl, etcdctl := "curl", demoEtcdctl(c)
	if t := c.TLS(); t != nil {
		curl += " --cacert " + t.CAFile()
	}
	fmt.Fprintf(w, `Authentication is on. Admin token (in %s):
  %s
Make a write or read token with it:
  %s -s -X POST -H "Authorization: Bearer $(cat %s)" '%s/v1/admin/tokens?role=write'
and send it as: -H "Authorization: Bearer TOKEN", or to the etcd API as
etcdctl's password: %s --user cairn:TOKEN get a

`, file, strings.TrimSpace(string(tok)), curl, file, c.URL(1), etcdctl)
}

// demoEtcdctl is the etcdctl command line for node 1's etcd API.
func demoEtcdctl(c *launcher.Cluster) string {
	if t := c.TLS(); t != nil {
		return "etcdctl --endpoints=https://" + c.Node(1).EtcdAddr + " --cacert " + t.CAFile()
	}
	return "etcdctl --endpoints=" + c.Node(1).EtcdAddr
}

// demoCertsDir, in the data dir, holds the CA and certificates of
// --secure.
const demoCertsDir = "certs"

// demoStopTimeout bounds each node's clean stop before it is killed.
const demoStopTimeout = 10 * time.Second

func runDemo(ctx context.Context, o demoOpts, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	peers, err := demoPeers(o)
	if err != nil {
		return err
	}
	httpAddrs := make([]string, o.nodes)
	etcdAddrs := make([]string, o.nodes)
	ips := make([]string, o.nodes)
	for i := range httpAddrs {
		httpAddrs[i] = net.JoinHostPort(o.host, fmt.Sprint(o.httpPort+i))
		etcdAddrs[i] = net.JoinHostPort(o.host, fmt.Sprint(o.httpPort+100+i))
		ips[i] = o.host
	}
	var outMu sync.Mutex
	var stopping atomic.Bool
	var tlsCfg *launcher.TLS
	if o.secure {
		tlsCfg = &launcher.TLS{Dir: filepath.Join(o.dataDir, demoCertsDir)}
	}
	c, err := launcher.New(launcher.Config{
		TLS: tlsCfg,
		Bin: exe, Nodes: o.nodes, Dir: o.dataDir, IPs: ips, HTTPAddrs: httpAddrs, PeerAddrs: peers, EtcdAddrs: etcdAddrs,
		Shards: o.shards, Replication: o.replication, Extra: demoExtra(o),
		StopTimeout: demoStopTimeout,
		Output: func(id int) io.Writer {
			return &lineWriter{prefix: fmt.Sprintf("[node-%d] ", id), w: stderr, mu: &outMu}
		},
		OnExit: func(id int, err error) {
			if stopping.Load() {
				return
			}
			outMu.Lock()
			fmt.Fprintf(stderr, "demo: node %d exited unexpectedly: %v\n", id, exitDesc(err))
			outMu.Unlock()
		},
	})
	if errors.Is(err, launcher.ErrAddrInUse) {
		return fmt.Errorf("%w (another demo running? choose --http-port)", err)
	}
	if err != nil {
		return err
	}
	stop := func() error {
		stopping.Store(true)
		return c.StopAll()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	readyCtx, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	go func() {
		select {
		case s := <-sig:
			interrupt(fmt.Errorf("interrupted by %s while starting", s))
			select { // should the cluster be ready already, the wait below sees it
			case sig <- s:
			default:
			}
		case <-readyCtx.Done():
		}
	}()

	if err := c.StartAll(); err != nil {
		_ = stop()
		return err
	}
	if err := c.WaitReady(readyCtx, 30*time.Second); err != nil {
		_ = stop()
		return err
	}
	interrupt(nil)
	printEndpoints(stdout, o, c)
	if o.auth {
		printAdminToken(stdout, c)
	}
	allExited := make(chan struct{})
	go func() {
		for id := 1; id <= c.Size(); id++ {
			<-c.Exited(id)
		}
		close(allExited)
	}()
	select {
	case s := <-sig:
		fmt.Fprintf(stderr, "demo: %s: stopping %d nodes\n", s, c.Size())
		if err := stop(); err != nil {
			fmt.Fprintf(stderr, "demo: %v\n", err)
		}
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

// lineWriter writes every complete line written to it to w, after prefix,
// holding mu (shared by every node's writer, so lines never interleave).
type lineWriter struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.mu.Lock()
		_, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i])
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 1<<20 { // a line without end: pass it on in pieces
		l.mu.Lock()
		_, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.mu.Unlock()
		l.buf = l.buf[:0]
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func printEndpoints(w io.Writer, o demoOpts, c *launcher.Cluster) {
	shards := o.shards
	if shards == 0 {
		shards = c.Size()
	}
	fmt.Fprintf(w, "Cairn demo: %d nodes, %d shards, replication %d, data in %s\n\n", c.Size(), shards, c.Replication(), o.dataDir)
	for id := 1; id <= c.Size(); id++ {
		n := c.Node(id)
		fmt.Fprintf(w, "  node %d   %s   (peer %s, etcd API %s)\n", n.ID, c.URL(id), n.PeerAddr, n.EtcdAddr)
	}
	a := c.URL(1)
	b := c.URL(c.Size())
	curl, kv := "curl", "cairn kv --endpoints "+strings.Join(c.Endpoints(), ",")
	if t := c.TLS(); t != nil {
		fmt.Fprintf(w, "\nTLS on both ports (mutual TLS between nodes); CA %s\n", t.CAFile())
		curl += " --cacert " + t.CAFile()
		kv += " --ca " + t.CAFile()
	}
	fmt.Fprintf(w, `
Try:
  %[3]s -i -X PUT --data-binary 'hello' '%[1]s/v0/entity?id=k1'
  %[3]s -i '%[2]s/v0/entity?id=k1'
  %[3]s -i -X PUT --data-binary 'world' %[1]s/v1/kv/greeting
  %[3]s -i %[2]s/v1/kv/greeting
  %[3]s -s %[1]s/v1/cluster
  %[4]s get greeting
  %[5]s put a 1 && %[5]s get a

Grow it from another terminal: cairn demo --add-node --http-port %[6]d

Ctrl-C stops every node.
`, a, b, curl, kv, demoEtcdctl(c), o.httpPort)
}
