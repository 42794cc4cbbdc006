package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/internal/lab/bench"
	"github.com/cairn-db/cairn/internal/lab/chaos"
	"github.com/cairn-db/cairn/internal/lab/report"
	"github.com/spf13/cobra"
)

func newChaosCmd() *cobra.Command {
	var (
		list, all      bool
		scenario, out  string
		duration       time.Duration
		nodes, clients int
		keys           int
		faultSpec      string
		partitions     string
		target         string
		sched          chaos.Schedule
		runs           int
		sweepSpec      string
		preload        int64
		valueSize      int
		indexKeys      int
		transferLimit  int
		snapshotRate   int64
		shards         int
		clientAPI      string
		portBase       int
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run fault-injection scenarios against a local cluster and check the results",
		Long: `Start a local cluster of cairn serve processes (with their fault hook on),
run a recorded client workload, inject the scenario's faults, heal, and check:
linearizability per key (porcupine), acknowledged writes lost, writes
applied twice (a retry applied again, a compare-and-set evaluated again),
replicas diverged. Writes results.json (and a chart) to --out; exits 1 when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			if list {
				for _, n := range chaos.Names() {
					s := chaos.Scenarios[n]
					fmt.Fprintf(w, "%-22s %s\n", n, s.Description)
				}
				return nil
			}
			if target != "" {
				if err := chaos.ValidTarget(target); err != nil {
					return usageError{err}
				}
			}
			var names []string
			scenarios := chaos.Scenarios
			if runs < 1 || runs > 1000 {
				return usageError{fmt.Errorf("--runs must be 1 to 1000")}
			}
			var sweepKind string
			var sweepValues []float64
			if sweepSpec != "" {
				if faultSpec != "" || all || scenario != "" {
					return usageError{fmt.Errorf("--sweep composes its own scenarios: not with --fault, --scenario or --all")}
				}
				var err error
				if sweepKind, sweepValues, err = chaos.ParseSweep(sweepSpec); err != nil {
					return usageError{err}
				}
			}
			switch {
			case sweepSpec != "":
			case faultSpec != "":
				if all || scenario != "" {
					return usageError{fmt.Errorf("--fault composes its own scenario: not with --scenario or --all")}
				}
				s, err := customScenario(faultSpec, target, sched)
				if err != nil {
					return usageError{err}
				}
				scenarios = map[string]chaos.Scenario{s.Name: s}
				names = []string{s.Name}
			case all:
				names = chaos.Names()
			case scenario != "":
				if _, ok := chaos.Scenarios[scenario]; !ok {
					return usageError{fmt.Errorf("unknown scenario %q (cairn chaos --list)", scenario)}
				}
				names = []string{scenario}
			default:
				return usageError{fmt.Errorf("give --scenario NAME, --all, --fault KIND or --list")}
			}
			if target != "" && faultSpec == "" {
				scenarios = retarget(scenarios, names, target)
			}
			if out == "" {
				out = filepath.Join(os.TempDir(), fmt.Sprintf("cairn-chaos-%d", time.Now().Unix()))
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if preload < -1 || valueSize < 1 || valueSize > 8<<20 {
				return usageError{fmt.Errorf("--preload must be 0 or more and --value-size 1 to 8 MiB")}
			}
			if shards < 0 {
				return usageError{fmt.Errorf("--shards must be 0 (one per node) or more")}
			}
			if clientAPI != "http" && clientAPI != "etcd" {
				return usageError{fmt.Errorf("--client must be http or etcd, not %q", clientAPI)}
			}
			if snapshotRate < -1 {
				return usageError{fmt.Errorf("--snapshot-rate must be 0 (unlimited) or more")}
			}
			if transferLimit < 0 || transferLimit > 64 {
				return usageError{fmt.Errorf("--transfer-limit must be 1 to 64 (0: the nodes' default)")}
			}
			o := runOpts{bin: bin, d: duration, nodes: nodes, clients: clients, keys: keys, partitions: partitions, runs: runs,
				preload: preload, valueSize: valueSize, indexKeys: indexKeys, transferLimit: transferLimit, snapshotRate: snapshotRate, shards: shards, etcd: clientAPI == "etcd", portBase: portBase}
			if sweepSpec != "" {
				if target == "" {
					target = "leader"
				}
				return runSweep(ctx, cmd, sweepKind, sweepValues, target, sched, out, o)
			}
			failed := 0
			for _, n := range names {
				dir := out
				if len(names) > 1 {
					dir = filepath.Join(out, n)
				}
				ok, err := runRepeated(ctx, cmd, scenarios[n], dir, o)
				if err != nil {
					return err
				}
				if !ok {
					failed++
				}
				if ctx.Err() != nil {
					break
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d scenario(s) failed a check", failed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the scenarios")
	f.Bool("secure", false, "run the cluster with TLS on both ports (a CA and certificates made in the run's directory) and the workload over https://")
	f.BoolVar(&all, "all", false, "run every scenario")
	f.StringVar(&scenario, "scenario", "", "scenario to run")
	f.StringVar(&out, "out", "", "results directory (default a new temporary one)")
	f.DurationVar(&duration, "duration", 40*time.Second, "length of the workload (raised to the scenario's minimum)")
	f.IntVar(&nodes, "nodes", 3, "cluster size (split cuts 5 nodes 2 vs 3)")
	f.IntVar(&clients, "clients", 6, "register clients")
	f.IntVar(&keys, "keys", 8, "register keys")
	f.StringVar(&partitions, "partitions", chaos.PartitionsAuto, "how partition faults cut the network: iptables (each node on its own loopback address, packets dropped by the kernel), hook (the nodes' fault hook) or auto (iptables where the lab can use it)")
	f.StringVar(&faultSpec, "fault", "", "compose a scenario: kill, pause, restart, partition (isolate the target), split (a minority with the target vs the majority), disk-stall=D, disk-full (the node's disk guard refuses new values), corrupt (one replica's values changed while the node is down; healing waits for the scrub to repair it), clock-skew=D (the node's clocks off by D while it lasts), clock-jump=D (they step by D once), cpu=CORES or memory=MB")
	f.StringVar(&target, "target", "", "where faults go: leader, follower, leader:SHARD, follower:SHARD, node:N or random (overrides a scenario's targets; default for --fault: leader)")
	f.DurationVar(&sched.At, "at", 10*time.Second, "--fault: first injection, after the start")
	f.DurationVar(&sched.For, "for", 10*time.Second, "--fault: how long each fault lasts")
	f.IntVar(&sched.Repeat, "repeat", 1, "--fault: how many times")
	f.DurationVar(&sched.Every, "every", 0, "--fault: from one injection to the next (default: --for plus 10s)")
	f.Int64Var(&preload, "preload", -1, fmt.Sprintf("load this many records (of --value-size bytes, through the bench lab's loader) before the workload, and mix reads and updates of them into it (default: %d for the memory scenarios and sweeps, none otherwise)", defaultMemoryPreload))
	f.IntVar(&indexKeys, "index-keys", 0, "also write this many keys with a secondary-index term (one client per node: PUTs with a term, PUTs moving the key to another term or stripping it, DELETEs) and check after healing that linearizable index queries return exactly the acknowledged objects (0: off)")
	f.StringVar(&clientAPI, "client", "http", "the API the workload's clients speak: http, or etcd (the nodes' etcd v3 API through etcd's Go client: Range, Put, Txn compare-and-swap; scenarios marked etcd always use it)")
	f.IntVar(&valueSize, "value-size", 1024, "bytes of each preloaded record")
	f.IntVar(&shards, "shards", 0, "shards at bootstrap (default: one per node)")
	f.IntVar(&transferLimit, "transfer-limit", 0, "set the cluster's transfer limit (concurrent replica moves touching one node, 1 to 64) at the start (default: the nodes' own, 2)")
	f.Int64Var(&snapshotRate, "snapshot-rate", -1, "set the cluster's snapshot rate (bytes/s each node streams snapshots at, 0 unlimited) at the start (default: the nodes' own)")
	f.IntVar(&portBase, "port-base", 0, "fix the nodes' ports: HTTP on BASE.., peers on BASE+nodes.., etcd API on BASE+2*nodes.. (default: free ports picked at start)")
	f.IntVar(&runs, "runs", 1, "run each scenario this many times on fresh clusters and report the pass rate (95 % Wilson interval) and each metric's median and spread")
	f.StringVar(&sweepSpec, "sweep", "", "run a fault at each setting of KIND=START:END:STEP (cpu=0.1:0.05:0.01 in cores, memory=512:224:32 in MB) on --target, with --at/--for, and chart throughput and p99 against it")
	return cmd
}

// customScenario builds the scenario of --fault and its schedule flags.
func customScenario(spec, target string, sched chaos.Schedule) (chaos.Scenario, error) {
	f, cgroups, err := chaos.ParseFault(spec)
	if err != nil {
		return chaos.Scenario{}, err
	}
	if target == "" {
		target = "leader"
	}
	if sched.Every == 0 {
		sched.Every = sched.For + 10*time.Second
	}
	if err := sched.Validate(); err != nil {
		return chaos.Scenario{}, err
	}
	return chaos.Scenario{
		Name: "custom", Cgroups: cgroups,
		Description: fmt.Sprintf("%s on %s at %v for %v, %d time(s) every %v", spec, target, sched.At, sched.For, sched.Repeat, sched.Every),
		MinDuration: sched.End() + 10*time.Second,
		Steps:       func(time.Duration) []chaos.Step { return sched.Steps(f, target) },
	}, nil
}

// retarget points every step of the named scenarios at target.
func retarget(in map[string]chaos.Scenario, names []string, target string) map[string]chaos.Scenario {
	out := map[string]chaos.Scenario{}
	for _, n := range names {
		s := in[n]
		steps := s.Steps
		s.Steps = func(d time.Duration) []chaos.Step {
			st := steps(d)
			for i := range st {
				st[i].Target = target
			}
			return st
		}
		s.Description += " (target: " + target + ")"
		out[n] = s
	}
	return out
}

// runScenario runs s once into dir and prints its verdict; a scenario
// that needs cgroups the machine lacks is skipped (Result.Skipped).
func runScenario(ctx context.Context, cmd *cobra.Command, s chaos.Scenario, dir string, o runOpts) (*chaos.Result, error) {
	w, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := max(o.d, s.MinDuration)
	res := &chaos.Result{Scenario: s.Name}
	if s.Cgroups {
		if err := chaos.CgroupsSupported(); err != nil {
			res.Skipped = err.Error()
			fmt.Fprintf(w, "%s: SKIPPED: %v\n", s.Name, err)
			return res, res.Write(dir)
		}
	}
	fmt.Fprintf(errw, "== %s: %s\n", s.Name, s.Description)
	pre, err := preloadFor(s, o)
	secure, _ := cmd.Flags().GetBool("secure")
	if err != nil {
		return nil, err
	}
	var etcd chaos.EtcdDialer
	if o.etcd || s.Etcd {
		etcd = dialEtcdKV
	}
	r, err := chaos.Run(ctx, chaos.Config{Scenario: s.Name, Bin: o.bin, Dir: dir, Nodes: o.nodes, Duration: d, Partitions: o.partitions, Secure: secure,
		Workload: chaos.WorkloadConfig{Clients: o.clients, Keys: o.keys, IndexKeys: o.indexKeys, Leases: s.Leases}, Etcd: etcd, Steps: s.Steps(d), Progress: errw, Preload: pre,
		TransferLimit: o.transferLimit, SnapshotRate: o.snapshotRateOpt(), Shards: cmp.Or(o.shards, s.Shards),
		HoldLoad: s.HoldLoad, PortBase: o.portBase})
	if err != nil {
		return nil, err
	}
	if err := r.Write(dir); err != nil {
		return nil, err
	}
	writeChaosChart(r, dir)
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s: %s — %d ops, linearizable %v, lost writes %d of %d, applied twice %d, replicas converged %v\n",
		s.Name, verdict, r.Ops, r.Linearizable, r.LostWrites, r.AckedWrites, len(r.AppliedTwice), r.ReplicasConverged)
	for _, f := range r.Faults {
		msg := ""
		if f.Error != "" {
			msg = " error: " + f.Error
		}
		fmt.Fprintf(w, "  %-10s %-9s node %d  %5.1fs–%5.1fs  unavailable %d ms  client errors %d%s  half baseline after %d ms  recovery %d ms  ops/s %.0f (baseline %.0f)  shards led %d -> %d%s\n",
			f.Kind, f.Param, f.Node, float64(f.StartMs)/1000, float64(f.EndMs)/1000, f.UnavailableMs, f.ClientErrors, byKind(f.ClientErrorsByKind),
			f.HalfBaselineMs, f.RecoveryMs, f.ThroughputDuring, f.Baseline, f.TargetLeadsBefore, f.TargetLeadsEnd, msg)
		if f.Note != "" {
			fmt.Fprintf(w, "    %s\n", f.Note)
		}
		if f.SettledMs > 0 {
			fmt.Fprintf(w, "    settled %.1fs after the injection: ops/s %.0f, p99 %.1f ms while settling (steady p99 before the fault %.1f ms)\n",
				float64(f.SettledMs-f.StartMs)/1000, f.ThroughputSettling, f.P99SettlingMs, r.P99BeforeMs)
		}
		if f.MemoryLimitBytes > 0 {
			fmt.Fprintf(w, "    memory: peak charge %d MB of a %d MB limit, limit hit %d times, %d OOM kills, restarted %v\n",
				f.PeakMemoryBytes>>20, f.MemoryLimitBytes>>20, f.LimitHits, f.OOMKills, f.Restarted)
		}
	}
	switch {
	case !r.Linearizable && r.CheckTimedOut:
		fmt.Fprintf(w, "  linearizability not proven: the check ran out of time (the history is in %s)\n", filepath.Join(dir, "history.json"))
	case !r.Linearizable:
		fmt.Fprintf(w, "  not linearizable: see %s\n", filepath.Join(dir, "linearizability.html"))
	}
	if len(r.LostKeys) > 0 {
		fmt.Fprintf(w, "  lost: %s\n", strings.Join(r.LostKeys[:min(10, len(r.LostKeys))], ", "))
	}
	if r.ReadBackError != "" {
		fmt.Fprintf(w, "  the healed cluster did not answer a read of an acknowledged write: %s\n", r.ReadBackError)
	}
	for _, a := range r.AppliedTwice[:min(10, len(r.AppliedTwice))] {
		fmt.Fprintf(w, "  applied twice: %s\n", a)
	}
	for _, dv := range r.Diverged {
		fmt.Fprintf(w, "  diverged: %s\n", dv)
	}
	if e := r.Elastic; e != nil {
		var errs uint64
		for _, n := range r.ClientErrors {
			errs += n
		}
		fmt.Fprintf(w, "  elastic: node %d held %d of %d replicas (%d active nodes) %.1fs after joining; read %d of %d records through it in %.1fs (%d not found, %d errors); node %d drained %.1fs after the decommission, exited by %.1fs, load still running %v; client errors %d\n",
			e.Joined, e.Held, e.Replicas, e.Active, float64(e.BalanceMs)/1000, e.KeysRead, e.Keys, float64(e.ReadMs)/1000, e.KeysMissing, e.ReadErrors,
			e.Drained, float64(e.DrainMs)/1000, float64(e.ExitMs)/1000, e.LoadRan, errs)
		for _, p := range e.Problems {
			fmt.Fprintf(w, "    problem: %s\n", p)
		}
	}
	if x := r.Index; x != nil {
		msg := ""
		if x.Error != "" {
			msg = " error: " + x.Error
		}
		fmt.Fprintf(w, "  index %s: %d writes; queries returned %d keys in %d pages, %d required: missing %d, unexpected %d%s\n",
			x.Index, x.Writes, x.Returned, x.Pages, x.Required, len(x.Missing), len(x.Unexpected), msg)
		for _, m := range x.Missing[:min(10, len(x.Missing))] {
			fmt.Fprintf(w, "    missing: %s\n", m)
		}
		for _, u := range x.Unexpected[:min(10, len(x.Unexpected))] {
			fmt.Fprintf(w, "    unexpected: %s\n", u)
		}
	}
	if x := r.Leases; x != nil {
		msg := ""
		if x.Error != "" {
			msg = " error: " + x.Error
		}
		gone := "all gone"
		if len(x.KeysLeft) > 0 {
			gone = "still there"
		}
		fmt.Fprintf(w, "  leases: %d workers granted %d (%d grants failed), kept %d, revoked %d, abandoned %d, gone %d, puts of unknown outcome %d; keepalives %d (%d failed), reads judged %d; violations %d; keys of ended leases %d, left %d (%s %.1fs after healing, bound %.0fs)%s\n",
			x.Workers, x.Granted, x.GrantErrors, x.Kept, x.Revoked, x.Abandoned, x.Gone, x.PutsUnknown, x.KeepAlives, x.KeepAliveErrors, x.Reads,
			len(x.Violations), x.ToVanish, len(x.KeysLeft), gone, float64(x.VanishedMs)/1000, float64(x.VanishBoundMs)/1000, msg)
		for _, v := range x.Violations[:min(10, len(x.Violations))] {
			fmt.Fprintf(w, "    violation: %s\n", v)
		}
		for _, k := range x.KeysLeft[:min(10, len(x.KeysLeft))] {
			fmt.Fprintf(w, "    left: %s\n", k)
		}
	}
	return r, nil
}

// byKind formats client errors by kind: " (timeout 3, unavailable 1)".
func byKind(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(kinds, ", ") + ")"
}

func writeChaosChart(r *chaos.Result, dir string) {
	thr := report.Series{Name: "ops/s"}
	p99 := report.Series{Name: "p99 ms"}
	for _, p := range r.Series {
		thr.X, thr.Y = append(thr.X, float64(p.Second)), append(thr.Y, p.Throughput)
		p99.X, p99.Y = append(p99.X, float64(p.Second)), append(p99.Y, p.P99)
	}
	var bands [][2]float64
	for _, f := range r.Faults {
		bands = append(bands, [2]float64{float64(f.StartMs) / 1000, float64(f.EndMs) / 1000})
	}
	_ = os.WriteFile(filepath.Join(dir, "throughput.svg"), []byte(report.LineChartBands(r.Scenario+": throughput (faults shaded)", "second", "ops/s", []report.Series{thr}, bands)), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "p99.svg"), []byte(report.LineChartBands(r.Scenario+": p99 latency (faults shaded)", "second", "ms", []report.Series{p99}, bands)), 0o644)
}

// dialEtcdKV makes the chaos lab's etcd clients (the bench lab's, over
// clientv3).
func dialEtcdKV(endpoints []string, tlsCfg *tls.Config) (chaos.EtcdKV, error) {
	kv, err := bench.DialEtcdKV(endpoints, tlsCfg)
	if err != nil {
		return nil, err
	}
	return kv, nil
}
