package main

import (
	"context"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/bench"
	"github.com/spf13/cobra"
)

type benchOpts struct {
	target, workload, consistency, indexConsistency, mix, replicas, sweep, out, label, distribution, httpVersion, route string
	cpuProfile, ca, cert, key, token                                                                                    string
	clients, conns, pipeline, keySize, valSize, fieldCount, fieldLength, indexTerms                                     int
	total, keys, records                                                                                                uint64
	duration, warmup, timeout, retryWait                                                                                time.Duration
	rate                                                                                                                float64
	sequential, noPreload                                                                                               bool
	seed                                                                                                                int64
}

func newBenchCmd() *cobra.Command {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load a Cairn cluster (or etcd) and measure throughput and latency",
		Long: `Run a workload against Cairn (--target http://h:p,... or https://h:p,... with --ca) or etcd
(--target etcd://h:p,...) with a closed loop (--clients over --conns) or an
open loop (--rate, latency from the intended send time), optionally as a
concurrency sweep, and write results.json plus per-operation CSVs to --out.

Workloads: ` + strings.Join(bench.Workloads, ", "),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "http://127.0.0.1:8080,http://127.0.0.1:8081,http://127.0.0.1:8082", "Cairn nodes (http://…) or etcd members (etcd://h:p,h:p)")
	f.StringVar(&o.workload, "workload", "put", "workload: "+strings.Join(bench.Workloads, ", "))
	f.IntVar(&o.clients, "clients", 1, "concurrent clients (closed loop)")
	f.IntVar(&o.conns, "conns", 0, "connections shared by the clients (default: one per client, at most 100)")
	f.Uint64Var(&o.total, "total", 0, "measured operations (0: run for --duration)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "measured time when --total is 0 (per sweep point)")
	f.DurationVar(&o.warmup, "warmup", time.Second, "load before measuring")
	f.Float64Var(&o.rate, "rate", 0, "open loop: operations per second (latency from the intended send time)")
	f.StringVar(&o.sweep, "sweep", "", "concurrency sweep, e.g. 1,2,4,8,16,32,64")
	f.IntVar(&o.keySize, "key-size", 8, "key size in bytes (put, range, large)")
	f.IntVar(&o.valSize, "val-size", 256, "value size in bytes (put, range; entity when set explicitly)")
	f.BoolVar(&o.sequential, "sequential-keys", false, "use keys in order instead of at random")
	f.Uint64Var(&o.keys, "keys", 10000, "key space (put, range, entity ids 1..N, large; nhs: objects preloaded)")
	f.StringVar(&o.consistency, "consistency", "l", "reads: l (linearizable) or s (serializable)")
	f.StringVar(&o.indexConsistency, "index-consistency", "s", "nhs: 2i queries: s (serializable: one replica per shard, as Riak's coverage queries) or l (linearizable: every shard's leader confirms)")
	f.StringVar(&o.mix, "mix", "", "operation weights, e.g. put=50,get=50 (entity, large; nhs: get, head_get, update, insert, index_query)")
	f.StringVar(&o.replicas, "replicas", "", "entity: v0 replicas=ACK/FROM")
	f.IntVar(&o.indexTerms, "index-terms", 0, "put, entity: secondary-index terms on every write (X-Cairn-Index-* headers; Cairn targets)")
	f.StringVar(&o.httpVersion, "http", "1.1", "Cairn targets: 1.1 (up to --pipeline requests in flight per connection) or 2 (HTTP/2 without TLS: many per connection, as etcd's gRPC)")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file")
	f.IntVar(&o.pipeline, "pipeline", 1, "Cairn targets over HTTP/1.1: requests in flight per connection (1: one at a time, as wrk and curl)")
	f.StringVar(&o.route, "route", bench.RouteLeader, "Cairn targets: leader (each request to the node leading its key's shard; every connection links to every node) or fixed (connection i to node i mod n)")
	f.Uint64Var(&o.records, "records", 1000, "YCSB record count (load phase)")
	f.IntVar(&o.fieldCount, "field-count", 10, "YCSB fields per record")
	f.IntVar(&o.fieldLength, "field-length", 100, "YCSB bytes per field")
	f.StringVar(&o.distribution, "distribution", "", "YCSB request distribution: zipfian, uniform or latest (default per workload)")
	f.BoolVar(&o.noPreload, "no-preload", false, "skip the load phase (range, ycsb, large)")
	f.StringVar(&o.out, "out", "", "directory for results.json and CSVs")
	f.StringVar(&o.label, "label", "", "name of this run in reports (default: target kind and workload)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "deadline of one operation")
	f.DurationVar(&o.retryWait, "retry-wait", 0, "wait after a 503 before the operation is tried again: 0 waits what its Retry-After asks (up to a tenth more), else a backoff from half to 1.5 times this")
	f.Int64Var(&o.seed, "seed", 1, "random seed")
	f.StringVar(&o.ca, "ca", "", "https:// Cairn targets: PEM file of the CA that signed the nodes' certificates")
	f.StringVar(&o.cert, "cert", "", "https:// Cairn targets: client certificate (PEM) for nodes started with --tls-client-auth")
	f.StringVar(&o.key, "key", "", "private key of --cert")
	f.StringVar(&o.token, "token", "", "Cairn targets started with --auth: a bearer token of role write (default: $CAIRN_TOKEN)")
	return cmd
}

func parseSweep(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 100000 {
			return nil, usageError{fmt.Errorf("--sweep: bad concurrency %q", p)}
		}
		out = append(out, n)
	}
	return out, nil
}

func runBench(cmd *cobra.Command, o benchOpts) error {
	mix, err := bench.ParseMix(o.mix)
	if err != nil {
		return usageError{err}
	}
	if o.consistency != "l" && o.consistency != "s" && o.consistency != "linearizable" && o.consistency != "serializable" {
		return usageError{fmt.Errorf("--consistency must be l or s")}
	}
	serializable := strings.HasPrefix(o.consistency, "s")
	if o.indexConsistency != "l" && o.indexConsistency != "s" && o.indexConsistency != "linearizable" && o.indexConsistency != "serializable" {
		return usageError{fmt.Errorf("--index-consistency must be l or s")}
	}
	indexLinear := strings.HasPrefix(o.indexConsistency, "l")
	valSize := o.valSize
	if o.workload == "entity" && !cmd.Flags().Changed("val-size") {
		valSize = 0 // the classic scripts' value<id>
	}
	if o.workload == "nhs" && !cmd.Flags().Changed("duration") {
		o.duration = time.Minute // the volume test: a long run (docs/benchmarks/volume)
	}
	if o.workload == "large" {
		// Riak-volume style: fewer, bigger records (4–16 KiB each) and a
		// long run, unless the flags say otherwise.
		if !cmd.Flags().Changed("keys") {
			o.keys = 1000
		}
		if !cmd.Flags().Changed("duration") {
			o.duration = time.Minute
		}
	}
	params := bench.Params{Workload: o.workload, KeySize: o.keySize, ValSize: valSize, Keys: o.keys, Sequential: o.sequential,
		Consistency: map[bool]string{true: "serializable", false: "linearizable"}[serializable], Mix: mix, Replicas: o.replicas,
		Records: o.records, FieldCount: o.fieldCount, FieldLength: o.fieldLength, Distribution: o.distribution, IndexTerms: o.indexTerms}
	if o.indexTerms != 0 && strings.HasPrefix(o.target, "etcd://") {
		return usageError{fmt.Errorf("--index-terms needs a Cairn (http:// or https://) target: etcd has no secondary indexes")}
	}
	wl, err := bench.NewWorkload(params)
	if err != nil {
		return usageError{err}
	}
	sweep, err := parseSweep(o.sweep)
	if err != nil {
		return err
	}
	levels := sweep
	if levels == nil {
		levels = []int{o.clients}
	}
	maxConns := 0
	for _, c := range levels {
		maxConns = max(maxConns, connsFor(o.conns, c))
	}
	if o.httpVersion != "1.1" && o.httpVersion != "2" {
		return usageError{fmt.Errorf("--http must be 1.1 or 2, got %q", o.httpVersion)}
	}
	if o.pipeline < 1 {
		return usageError{fmt.Errorf("--pipeline must be at least 1, got %d", o.pipeline)}
	}
	// The load model of every sweep point, checked before the preload.
	stderr := cmd.ErrOrStderr()
	runCfg := bench.RunConfig{Clients: levels[0], Conns: connsFor(o.conns, levels[0]), Total: o.total,
		Duration: o.duration, Warmup: o.warmup, Rate: o.rate, OpTimeout: o.timeout, RetryWait: o.retryWait, Seed: o.seed, Progress: stderr, TTY: isTerminal(os.Stderr)}
	if err := runCfg.EnsureDefaults().Validate(); err != nil {
		return usageError{err}
	}
	if o.token == "" {
		o.token = os.Getenv("CAIRN_TOKEN") // as --token's help says
	}
	tlsCfg, err := client.LoadTLS(o.ca, o.cert, o.key)
	if err != nil {
		return usageError{err}
	}
	drv, err := bench.NewDriver(bench.DriverConfig{Target: o.target, TLS: tlsCfg, Token: o.token, Conns: maxConns, Serializable: serializable, IndexLinearizable: indexLinear,
		Replicas: o.replicas, Timeout: o.timeout, HTTP2: o.httpVersion == "2", Pipeline: o.pipeline, Route: o.route})
	if err != nil {
		return usageError{err}
	}
	defer drv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := &result.Result{Workload: o.workload, Target: o.target, TargetKind: bench.TargetKind(o.target),
		Machine: result.ThisMachine(version), StartedAt: time.Now().UTC(), Approximations: wl.Approximations(), Label: o.label}
	if res.Label == "" {
		res.Label = res.TargetKind + " " + o.workload
	}
	res.Params = map[string]any{"workload": params, "clients": o.clients, "conns": o.conns, "total": o.total,
		"duration": o.duration.String(), "warmup": o.warmup.String(), "rate": o.rate, "sweep": sweep,
		"timeout": o.timeout.String(), "retry_wait": o.retryWait.String(), "seed": o.seed, "consistency": params.Consistency}
	if o.workload == "nhs" {
		res.Params["index_consistency"] = map[bool]string{true: "linearizable", false: "serializable"}[indexLinear]
	}
	if res.TargetKind == "cairn" {
		res.Params["http"] = o.httpVersion
		res.Params["route"] = o.route
		if o.httpVersion == "1.1" {
			res.Params["pipeline"] = o.pipeline
		}
	}
	if !o.noPreload {
		if n, _ := wl.Preload(); n > 0 {
			fmt.Fprintf(stderr, "preloading %d records (the %s workload reads them)…\n", n, o.workload)
			start := time.Now()
			if res.Preloaded, err = bench.Preload(ctx, drv, wl, min(maxConns*4, 256), o.timeout); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "preloaded %d records in %v\n", res.Preloaded, time.Since(start).Round(time.Millisecond))
		}
	}
	if o.cpuProfile != "" {
		pf, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var best result.RunResult
	for i, c := range levels {
		if len(levels) > 1 {
			fmt.Fprintf(stderr, "sweep %d/%d: %d clients\n", i+1, len(levels), c)
		}
		rc := runCfg
		rc.Clients, rc.Conns = c, connsFor(o.conns, c)
		run, err := bench.Run(ctx, drv, wl, rc)
		if err != nil {
			return err
		}
		res.Sweep = append(res.Sweep, result.SweepPoint{Clients: run.Clients, Conns: run.Conns, Ops: run.All.Ops,
			Errors: run.All.Errors, Throughput: run.All.Throughput, LatencyMs: run.All.Latency})
		if i == 0 || run.All.Throughput > best.All.Throughput {
			best = run
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(levels) == 1 {
		res.Sweep = nil
	}
	res.Fill(best)
	res.PrintSummary(cmd.OutOrStdout())
	if o.out != "" {
		if err := res.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "results written to %s\n", o.out)
	}
	return nil
}

// connsFor: the default is one connection per client, at most 100.
func connsFor(conns, clients int) int {
	if conns > 0 {
		return min(conns, clients)
	}
	return min(clients, 100)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
