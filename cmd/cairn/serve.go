package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"github.com/cairn-db/cairn/internal/server"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newServeCmd() *cobra.Command {
	var (
		nodeID                             uint64
		httpAddr, peerAddr                 string
		initialCluster, dataDir            string
		shards, replication                int
		requestTimeout, tick               time.Duration
		maxKey, maxValue                   int
		maxInflight, groupWrites, maxConns int
		groupDelay                         time.Duration
		cacheSize                          int64
		valueSeparation                    int
		unsafeNoSync                       bool
		faultInjection                     bool
		etcdAddr                           string
		quotaBytes, diskReserve            int64
		splitSize                          int64
		splitLoad                          float64
		tlsFiles, peerTLS                  security.Files
		clientAuth                         string
		authOn                             bool
		join                               []string
		role                               string
		deadNodeTimeout                    time.Duration
		transferLimit                      int
		snapshotRate                       int64
		shardSoftLimit                     int
		scrubInterval                      time.Duration
		leaseReads                         bool
		watchHistory                       int
		watchHistoryBytes                  int64
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one Cairn node",
		Long: `Run one Cairn node. On first start the node bootstraps its shards from
--initial-cluster, --shards and --replication; on restart it recovers from
--data-dir and ignores bootstrap flags that conflict with what it persisted
(with a warning).

A node with an empty --data-dir joins a running cluster with --join
http://HOST:PORT[,...] instead of --initial-cluster: the cluster admits it
(refusing an id in use elsewhere or ever removed), tells it the members and
shards, and its balancer moves replicas onto it. It restarts without
--join. See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodeID == 0 {
				return fmt.Errorf("--node-id is required (a positive integer)")
			}
			var peers map[uint64]string
			if len(join) == 0 || cmd.Flags().Changed("initial-cluster") {
				if len(join) > 0 {
					return usageError{fmt.Errorf("--join and --initial-cluster exclude each other: a joining node learns the members from the cluster")}
				}
				var err error
				if peers, err = server.ParseCluster(initialCluster); err != nil {
					return err
				}
			}
			if peerAddr == "" {
				peerAddr = peers[nodeID]
			}
			etcd, etcdOptional, err := etcdListenAddr(etcdAddr, cmd.Flags().Changed("etcd-addr"), httpAddr)
			if err != nil {
				return err
			}
			auth, err := security.ParseClientAuth(clientAuth)
			if err != nil {
				return usageError{err}
			}
			if unsafeNoSync {
				slog.Warn("UNSAFE: --unsafe-no-sync is on; acknowledged writes can be lost on a crash")
			}
			if watchHistory <= 0 {
				watchHistory = -1 // server.Config: negative is none, 0 the default
			}
			srv, err := server.New(server.Config{
				NodeID: nodeID, HTTPAddr: httpAddr, PeerAddr: peerAddr, InitialCluster: peers,
				DataDir: dataDir, Shards: shards, Replication: replication,
				RequestTimeout: requestTimeout, MaxKeySize: maxKey, MaxValueSize: maxValue,
				MaxInflight: maxInflight, MaxConns: maxConns, TickInterval: tick, LeaseReads: leaseReads, ScrubInterval: scrubInterval, UnsafeNoSync: unsafeNoSync, FaultInjection: faultInjection,
				GroupCommitDelay: groupDelay, GroupCommitWrites: groupWrites, CacheSize: cacheSize, ValueSeparation: valueSeparation,
				Version: version, Logger: slog.Default(), TuneRuntime: true,
				EtcdAddr: etcd, EtcdAddrOptional: etcdOptional,
				QuotaBytes: quotaBytes, DiskReserveBytes: diskReserve, SplitSize: autoSplit(splitSize), SplitLoad: splitLoad,
				TLS: tlsFiles, ClientAuth: auth, PeerTLS: peerTLS, Auth: authOn,
				Join: join, Role: role, DeadNodeTimeout: deadNodeTimeout, TransferLimit: transferLimit, SnapshotRate: snapshotRate,
				ShardSoftLimit: shardSoftLimit,
				WatchHistory:   watchHistory, WatchHistoryBytes: watchHistoryBytes,
			})
			if err != nil {
				return err
			}
			srv.Start()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			select {
			case s := <-sig:
				slog.Info("stopping", "signal", s.String())
				return stopWithin(srv, sig, stopTimeout)
			case <-srv.Removed():
				_ = stopWithin(srv, sig, stopTimeout)
				return fmt.Errorf("node %d was removed from the cluster; it exits and will refuse to start on this data dir", nodeID)
			case err := <-srv.Refused():
				// Another member's address: serving on it would take
				// that member's clients or raft traffic.
				_ = stopWithin(srv, sig, stopTimeout)
				return err
			}
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&nodeID, "node-id", 0, "this node's id in --initial-cluster (required)")
	f.StringVar(&httpAddr, "http-addr", "127.0.0.1:8080", "client HTTP listen address")
	f.StringVar(&peerAddr, "peer-addr", "", "peer gRPC listen address (default: this node's --initial-cluster address)")
	f.StringVar(&initialCluster, "initial-cluster", "1=127.0.0.1:9080", "every node as id=peer-host:port, comma separated")
	f.StringVar(&dataDir, "data-dir", "./cairn-data/node-1", "directory of this node's data")
	f.IntVar(&shards, "shards", 0, "number of shards at bootstrap (0: one per node of --initial-cluster)")
	f.IntVar(&replication, "replication", 3, "replicas per shard at bootstrap")
	f.DurationVar(&requestTimeout, "request-timeout", 5*time.Second, "default deadline of a client request")
	f.IntVar(&maxKey, "max-key-size", 4096, "largest key in bytes (400 above)")
	f.IntVar(&maxValue, "max-value-size", 8<<20, "largest value in bytes (413 above)")
	f.IntVar(&maxInflight, "max-inflight", 4096, "client requests in flight per node before 503")
	f.IntVar(&shardSoftLimit, "shard-soft-limit", server.DefaultShardSoftLimit, "requests one shard may have queued on a node before the next ones for it get 503 shard_overloaded at once (0: off)")
	f.IntVar(&maxConns, "max-conns", 4096, "client connections served at once, HTTP/1.1 and HTTP/2 (503 and close beyond); the etcd API port has the same bound of its own (close beyond)")
	f.DurationVar(&tick, "tick", 100*time.Millisecond, "raft tick; the election timeout is 10 ticks, heartbeats every tick")
	f.BoolVar(&leaseReads, "lease-reads", true, "a shard's leader answers linearizable reads without a quorum round for 0.9 × (election timeout − 3 ticks) after one (assumes clock rates within 10 %, the same --tick on every node and no virtual machine pauses; docs/architecture.md); false: every read confirms leadership")
	f.DurationVar(&scrubInterval, "scrub-interval", 10*time.Minute, "how often each shard's replicas hash and compare their data (a replica outside the majority is replaced by a snapshot) and the node verifies its sstable checksums; 0: off (docs/scrub.md)")
	f.DurationVar(&groupDelay, "group-commit-delay", 3*time.Millisecond, "longest wait between log syncs while many writes wait (group commit; 0: off)")
	f.IntVar(&groupWrites, "group-commit-writes", 256, "writes waiting on the node at which the whole --group-commit-delay applies (scaled below, none under a quarter)")
	f.IntVar(&valueSeparation, "value-separation", storage.DefaultValueSeparation, "values of at least this many bytes are kept in Pebble's blob files, out of compactions (-1: all inline)")
	f.Int64Var(&cacheSize, "cache-size", storage.DefaultCacheSize, "bytes of Pebble's block cache, which its memtables share (data, index and filter blocks of the node's files); under a cgroup memory limit the node holds at most 35 % of the limit there")
	f.BoolVar(&unsafeNoSync, "unsafe-no-sync", false, "UNSAFE: never fsync; acknowledged writes can be lost (experiments only)")
	f.StringVar(&etcdAddr, "etcd-addr", "", `etcd v3 gRPC API listen address (default: the --http-addr port + 100, skipped with a warning if busy; "off" to disable)`)
	f.Float64Var(&splitLoad, "split-load", 0, "a shard whose log grows by more than this many entries per second (its writes, mostly) at three checks in a row, 30 s apart, is split in two halves by its leader like one that passed --split-size (0: never for load)")
	f.Int64Var(&splitSize, "split-size", 256<<20, "a shard whose data takes more than this many bytes on disk is split in two halves of its token range by its leader (no data is copied; 0: never split automatically; POST /v1/admin/shards/{id}/split splits by hand)")
	f.Int64Var(&quotaBytes, "quota-bytes", 0, "past this many bytes of storage on disk the node answers new values with 507 quota_exceeded (reads and deletes still work; 0: no quota)")
	f.Int64Var(&diskReserve, "disk-reserve-bytes", server.DefaultDiskReserve, "below this much free space on the data directory's filesystem the node answers new values with 507 disk_full and hands its leaderships away (negative: no check)")
	f.StringVar(&role, "role", "", "with --join: voter (the default) or read-replica, a node holding a non-voting learner of every shard that serves serializable reads locally (docs/operations.md); later changed with `cairn admin node set-role`")
	f.StringSliceVar(&join, "join", nil, "join the running cluster of these node URLs (http://host:port, comma separated) instead of bootstrapping; needs an empty --data-dir and explicit --http-addr and --peer-addr")
	f.DurationVar(&deadNodeTimeout, "dead-node-timeout", 5*time.Minute, "a node silent this long is declared dead and its replicas replaced (negative: never)")
	f.IntVar(&transferLimit, "transfer-limit", 2, "replica moves touching one node at once (PUT /v1/admin/settings changes it cluster-wide)")
	f.IntVar(&watchHistory, "watch-history", 20000, "log indexes per shard whose changes are kept for etcd watches, the same on every node (0: none; each write then skips reading the value it replaces)")
	f.Int64Var(&watchHistoryBytes, "watch-history-bytes", server.DefaultWatchHistoryBytes, "bytes per shard of those changes (keys and values, with overhead), the same on every node: the oldest go first past it (negative: no bound but --watch-history)")
	f.Int64Var(&snapshotRate, "snapshot-rate", defaultSnapshotRate, "snapshot streaming bound in bytes/s for all of the node's outgoing snapshots together, 0 unlimited (PUT /v1/admin/settings changes it cluster-wide)")
	f.BoolVar(&faultInjection, "fault-injection", false, "enable /v1/admin/fault (partitions, disk stalls) for cairn chaos; never in production")
	f.StringVar(&tlsFiles.Cert, "tls-cert", "", "client port: PEM certificate (with --tls-key the port speaks HTTPS only, HTTP/1.1 and HTTP/2 by ALPN)")
	f.StringVar(&tlsFiles.Key, "tls-key", "", "client port: PEM private key of --tls-cert")
	f.StringVar(&tlsFiles.CA, "tls-ca", "", "client port: CA that client certificates must chain to (used when --tls-client-auth asks)")
	f.StringVar(&clientAuth, "tls-client-auth", "none", "client port: none, verify-if-given or require (client certificates signed by --tls-ca)")
	f.StringVar(&peerTLS.Cert, "peer-tls-cert", "", "peer port: this node's PEM certificate (cairn cert node); with --peer-tls-key and --peer-tls-ca nodes speak mutual TLS")
	f.StringVar(&peerTLS.Key, "peer-tls-key", "", "peer port: PEM private key of --peer-tls-cert")
	f.StringVar(&peerTLS.CA, "peer-tls-ca", "", "peer port: the cluster CA every node's certificate must chain to")
	f.BoolVar(&authOn, "auth", false, "require bearer tokens with roles (read, write, admin) on the client port; the lowest-id node makes the first admin token and writes it to DATA-DIR/admin-token (docs/security.md)")
	return cmd
}

// stopTimeout bounds a clean stop: requests in flight get this long to
// finish. stopWithin gives up on a clean stop a little after it.
const stopTimeout = 10 * time.Second

// stopWithin stops srv cleanly, but returns at the latest 5 s after
// timeout or at a second signal, whatever is still running: every
// acknowledged write is already fsync'd, so a node that exits without a
// clean stop loses nothing it acknowledged.
func stopWithin(srv *server.Server, sig <-chan os.Signal, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(ctx) }()
	hard := time.NewTimer(timeout + 5*time.Second)
	defer hard.Stop()
	select {
	case err := <-stopped:
		return err
	case s := <-sig:
		return fmt.Errorf("second signal (%s): exiting without a clean stop", s)
	case <-hard.C:
		return fmt.Errorf("the clean stop took over %s: exiting without it", timeout+5*time.Second)
	}
}

// etcdListenAddr is where the etcd API listens: the flag's value when set
// ("off": nowhere), else the HTTP port + 100 — optional then: a busy port
// is a warning, not a failure to start.
func etcdListenAddr(flag string, set bool, httpAddr string) (addr string, optional bool, err error) {
	if set {
		if flag == "off" {
			return "", false, nil
		}
		return flag, false, nil
	}
	host, port, err := net.SplitHostPort(httpAddr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p+100 > 65535 {
		return "", true, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+100)), true, nil
}

// autoSplit maps --split-size to server.Config.SplitSize: 0 (never)
// becomes negative, the store's "disabled".
func autoSplit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// defaultSnapshotRate is --snapshot-rate's default, 16 MiB/s: a node
// streaming snapshots without a bound (a join's replica moves) takes
// enough of a small machine's CPU and disk to triple the p99 of the
// writes it serves meanwhile; at 16 MiB/s a 75 MB replica moves in about
// 5 s (docs/operations.md, "What a join costs").
const defaultSnapshotRate = 16 << 20
