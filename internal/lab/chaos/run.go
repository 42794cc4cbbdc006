package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/lab/result"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
)

// Step is one scheduled fault: injected At after the start, healed after
// For, into the node chosen by Target when the step starts: "leader" or
// "follower" (of shard 1; "leader:S" for shard S), "node:N" or "random".
type Step struct {
	Fault  Fault
	Target string
	At     time.Duration
	For    time.Duration
}

// FaultResult is what happened around one fault.
type FaultResult struct {
	Kind          string `json:"kind"`
	Param         string `json:"param,omitempty"`
	Target        string `json:"target"`
	Node          int    `json:"node"`
	StartMs       int64  `json:"start_ms"`
	EndMs         int64  `json:"end_ms"`
	UnavailableMs int64  `json:"unavailable_ms"`
	// ClientErrors counts the register writes and compare-and-sets whose
	// outcome the client could not learn, called from the injection to 5 s
	// after healing; ClientErrorsByKind splits them by errKind.
	ClientErrors       int            `json:"client_errors"`
	ClientErrorsByKind map[string]int `json:"client_errors_by_kind"`
	RecoveryMs         int64          `json:"recovery_ms"`
	// HalfBaselineMs is the time from the injection to the end of the
	// first second from which throughput stays at or above half the
	// baseline until the fault heals; -1 when the fault ends below it.
	HalfBaselineMs int64 `json:"half_baseline_ms"`
	// ThroughputDuring is the mean ops/s while the fault lasted, and
	// Baseline the mean before the first fault.
	ThroughputDuring float64 `json:"throughput_during"`
	// P99DuringMs is the 99th percentile latency of the register
	// operations invoked while the fault lasted (0: none).
	P99DuringMs float64 `json:"p99_during_ms"`
	Baseline    float64 `json:"baseline"`
	// SettledMs is when the work the fault started was seen done (a
	// join's rebalance, a drain, a dead node's replicas rebuilt), from the
	// run's start; 0 when the fault does not track it or it was not seen
	// before healing. P99SettlingMs and ThroughputSettling are the p99
	// latency of the register operations invoked, and the mean ops/s,
	// from the injection to then.
	SettledMs          int64   `json:"settled_ms,omitempty"`
	P99SettlingMs      float64 `json:"p99_settling_ms,omitempty"`
	ThroughputSettling float64 `json:"throughput_settling,omitempty"`
	// TargetLeadsBefore and TargetLeadsEnd count the shards the target
	// node led just before the injection and just before healing, as the
	// other nodes see it (-1: unknown).
	// OtherWritesOK counts the register writes and compare-and-sets
	// invoked through nodes other than the target while the fault lasted
	// that succeeded (a disk-full fault needs some: the cluster must keep
	// taking writes).
	OtherWritesOK     int `json:"other_writes_ok"`
	TargetLeadsBefore int `json:"target_leads_before"`
	TargetLeadsEnd    int `json:"target_leads_end"`
	// PeakMemoryBytes is the peak charge of the node's memory group while
	// a memory fault lasted, MemoryLimitBytes its limit, LimitHits how
	// often the group reached it, OOMKills the kernel's kills in it and
	// Restarted whether the lab had to start the node again (it died).
	// Zero for other faults (and -1 where the kernel keeps no count).
	PeakMemoryBytes  int64 `json:"peak_memory_bytes,omitempty"`
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	LimitHits        int64 `json:"limit_hits,omitempty"`
	OOMKills         int64 `json:"oom_kills,omitempty"`
	Restarted        bool  `json:"restarted,omitempty"`
	// Note is what the fault said about its injection and healing (the
	// sides of a split, whether a memory limit took the node's pages…).
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// Result is results.json of a chaos run.
type Result struct {
	Scenario string `json:"scenario"`
	// Client is the API the workload spoke: "etcd" (Config.Etcd),
	// empty for the HTTP API.
	Client          string  `json:"client,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
	Ops             int     `json:"ops"`
	// Throughput is the run's mean operations per second and P99Ms the
	// 99th percentile latency of all its operations.
	Throughput float64 `json:"throughput"`
	P99Ms      float64 `json:"p99_ms"`
	// P99BeforeMs is the p99 latency of the register operations invoked
	// before the first fault, after a 2 s warm-up (the steady p99; 0: none).
	P99BeforeMs   float64  `json:"p99_before_ms,omitempty"`
	Linearizable  bool     `json:"linearizable"`
	CheckTimedOut bool     `json:"check_timed_out,omitempty"`
	LostWrites    int      `json:"lost_writes"`
	LostKeys      []string `json:"lost_keys,omitempty"`
	// ReadBackError: an acknowledged write could not be read back after
	// healing (the healed cluster did not answer): the run fails.
	ReadBackError string `json:"read_back_error,omitempty"`
	// AppliedTwice lists the writes that took effect more than once (a
	// retry applied again, a compare-and-set evaluated again:
	// checker.AppliedTwice); empty when none.
	AppliedTwice      []string          `json:"applied_twice"`
	AckedWrites       int               `json:"acked_writes"`
	ReplicasConverged bool              `json:"replicas_converged"`
	Diverged          []string          `json:"diverged,omitempty"`
	Faults            []FaultResult     `json:"faults"`
	ClientErrors      map[string]uint64 `json:"client_errors"`
	Series            []result.Point    `json:"series"`
	Skipped           string            `json:"skipped,omitempty"`
	// Partitions is how partition faults cut the network (iptables or
	// hook).
	Partitions string `json:"partitions,omitempty"`
	// Preloaded records of ValueSize bytes were under the workload
	// (PreloadConfig); 0: none.
	Preloaded uint64 `json:"preloaded,omitempty"`
	// Backups are the checks of the backups backup faults took.
	Backups   []BackupCheck `json:"backups,omitempty"`
	ValueSize int           `json:"value_size,omitempty"`
	// Index is the index check of a run whose workload wrote indexed
	// keys (WorkloadConfig.IndexKeys); nil: none.
	Index *IndexCheck `json:"index,omitempty"`
	// Elastic is the elastic scenario's check (a join, a read of every
	// preloaded record through the new node, a drain); nil: not run.
	Elastic *ElasticCheck `json:"elastic,omitempty"`
	// Leases is the lease check of a run with a lease workload
	// (WorkloadConfig.Leases); nil: none.
	Leases *LeaseCheck `json:"leases,omitempty"`
}

// Passed reports whether every check passed.
func (r *Result) Passed() bool {
	// A fault that was not injected proves nothing; a disk-full fault
	// needs the other nodes to keep taking writes (Failures).
	return r.Skipped != "" || len(r.Failures()) == 0
}

// Run starts a cluster, runs the workload and the faults, heals, checks.
// It fills cfg's defaults and validates it first.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	clusterDir := filepath.Join(cfg.Dir, "cluster")
	if removed, err := freshClusterDir(clusterDir); err != nil {
		return nil, err
	} else if removed {
		logf("removed %s: the nodes of an earlier run in the same --out", clusterDir)
	}
	c, err := StartCluster(ClusterConfig{Bin: cfg.Bin, Nodes: cfg.Nodes, Dir: clusterDir, Partitions: cfg.Partitions,
		Secure: cfg.Secure, Shards: cfg.Shards, PortBase: cfg.PortBase})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if cfg.TransferLimit > 0 {
		if err := c.setTransferLimit(cfg.TransferLimit); err != nil {
			return nil, err
		}
		logf("transfer limit %d", cfg.TransferLimit)
	}
	if r := cfg.SnapshotRate; r != nil {
		if err := c.setSnapshotRate(*r); err != nil {
			return nil, err
		}
		logf("snapshot rate %d bytes/s (0: unlimited)", *r)
	}
	logf("cluster of %d nodes ready (partitions via %s); running %s for %v", c.Size(), c.PartitionMechanism(), cfg.Scenario, cfg.Duration)
	var preloaded uint64
	if p := cfg.Preload; p.Keys > 0 {
		logf("preloading %d records of %d bytes…", p.Keys, p.ValueSize)
		t0 := time.Now()
		if err := p.Load(ctx, c.Endpoints()); err != nil {
			return nil, fmt.Errorf("chaos: preload: %w", err)
		}
		preloaded = p.Keys
		logf("preloaded %d records in %v", p.Keys, time.Since(t0).Round(time.Millisecond))
		for i := range c.Size() {
			if g := c.groups[i]; g != nil {
				if v, ok := g.memoryUsage(); ok {
					logf("node %d: memory group charged %d MB after the preload", i+1, v>>20)
				}
			}
		}
	}

	start := time.Now()
	c.preload, c.loadEnd = cfg.Preload, start.Add(cfg.Duration)
	if cfg.HoldLoad {
		c.loadEnd = time.Time{} // with the steps
	}
	rec := &recorder{start: start, acked: map[string]string{}, perf: result.NewRecorder(start, nil)}
	wctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	if cfg.HoldLoad {
		wctx, stopLoad = context.WithCancel(ctx)
	}
	defer stopLoad()
	wait, err := c.startLoad(wctx, rec, cfg.Workload, cfg.Preload, cfg.Etcd)
	if err != nil {
		return nil, err
	}
	faults := runSteps(wctx, c, cfg.Steps, start, logf)
	if cfg.HoldLoad {
		sleepUntil(wctx, start.Add(cfg.Duration))
		stopLoad()
	}
	wait()
	// Heal anything still injected, then let the cluster settle.
	for i := range c.Size() {
		if c.isRetired(i + 1) { // left the cluster for good
			continue
		}
		c.Resume(i + 1)
		_ = c.Start(i + 1)
		_ = c.admin(i+1, func(ctx context.Context, a *client.Admin) error { return a.HealFaults(ctx) })
	}
	for _, x := range c.extraNodes() {
		if !c.isRetired(x.id) {
			_ = c.startNode(x.id)
		}
	}
	elapsed, healed := time.Since(start), time.Now()
	if err := c.WaitReady(30 * time.Second); err != nil {
		return nil, err
	}
	var leases *LeaseCheck
	if rec.leaseWorkers > 0 { // first: its bound runs from the healing
		eps, _ := c.etcdEndpoints() // the workload had them
		leases = checkLeases(rec, cfg.Etcd, eps, c.etcdTLS(), healed, cfg.Dir, logf)
	}
	res := &Result{Scenario: cfg.Scenario, DurationSeconds: elapsed.Seconds(), Faults: faults, Partitions: c.PartitionMechanism(),
		Preloaded: preloaded, ValueSize: cfg.Preload.ValueSize}
	if cfg.Etcd != nil {
		res.Client = "etcd"
	}
	if preloaded == 0 {
		res.ValueSize = 0
	}
	// Every node the run started, those that left the cluster reporting
	// no replica (c.hashesOf).
	if err := checkRun(res, rec, elapsed, cfg.Dir, c.Endpoints(), c.clientOptions, len(c.allNodes()), c.hashesOf, logf); err != nil {
		return nil, err
	}
	res.Backups = checkBackups(ctx, c, rec, start, logf)
	res.Elastic = c.elastic.check
	res.Leases = leases
	return res, nil
}

func without(all []string, x string) []string {
	var out []string
	for _, a := range all {
		if a != x {
			out = append(out, a)
		}
	}
	return out
}

// runSteps injects and heals the scheduled faults in order.
func runSteps(ctx context.Context, c *Cluster, steps []Step, start time.Time, logf func(string, ...any)) []FaultResult {
	var out []FaultResult
	for _, s := range steps {
		fr := FaultResult{Kind: s.Fault.Kind(), Param: s.Fault.Param(), Target: s.Target}
		if !sleepUntil(ctx, start.Add(s.At)) {
			break
		}
		node, err := pickTarget(c, s.Target)
		if err != nil {
			fr.Error = err.Error()
			out = append(out, fr)
			continue
		}
		fr.Node = node
		fr.TargetLeadsBefore = c.LeaderCount(node)
		c.takeNotes()
		fr.StartMs = time.Since(start).Milliseconds()
		err = s.Fault.Inject(c, node)
		if err != nil {
			fr.Error = err.Error()
		}
		notes := c.takeNotes()
		logf("%6.1fs inject %s %s into node %d (%s)%s", float64(fr.StartMs)/1000, fr.Kind, fr.Param, node, s.Target, noteSuffix(notes, err))
		sleepUntil(ctx, start.Add(s.At+s.For))
		fr.TargetLeadsEnd = c.LeaderCount(node)
		err = s.Fault.Heal(c, node)
		if err != nil && fr.Error == "" {
			fr.Error = err.Error()
		}
		fr.EndMs = time.Since(start).Milliseconds()
		if t := c.takeSettled(); !t.IsZero() {
			fr.SettledMs = t.Sub(start).Milliseconds()
		}
		if m, ok := c.takeMem(node); ok {
			fr.PeakMemoryBytes, fr.MemoryLimitBytes, fr.LimitHits, fr.OOMKills, fr.Restarted = m.peak, m.limit, m.hits, m.ooms, m.restarted
		}
		healNotes := c.takeNotes()
		fr.Note = strings.Join(append(notes, healNotes...), "; ")
		logf("%6.1fs healed node %d%s", time.Since(start).Seconds(), node, noteSuffix(healNotes, err))
		out = append(out, fr)
	}
	return out
}

// noteSuffix formats a fault's notes and error for its log line.
func noteSuffix(notes []string, err error) string {
	if err != nil {
		notes = append(notes, "error: "+err.Error())
	}
	if len(notes) == 0 {
		return ""
	}
	return ": " + strings.Join(notes, "; ")
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-time.After(time.Until(t)):
		return true
	case <-ctx.Done():
		return false
	}
}

func pickTarget(c *Cluster, target string) (int, error) {
	kind, num, err := parseTarget(target)
	if err != nil {
		return 0, err
	}
	var n int
	switch kind {
	case "leader", "follower":
		l, f, err := c.Leader(num)
		if err != nil {
			return 0, err
		}
		n = l
		if kind == "follower" {
			n = f
		}
	case "node":
		n = int(min(num, uint64(c.Size()+1))) // out of range either way, without overflow
	case "random":
		n = 1 + rand.IntN(c.Size())
	}
	if n < 1 || n > c.Size() {
		return 0, fmt.Errorf("chaos: no node for target %q", target)
	}
	return n, nil
}

// measureFaults fills each fault's unavailability, errors and recovery.
func measureFaults(res *Result, rec *recorder, start time.Time) {
	series := res.Series
	if len(res.Faults) == 0 {
		return
	}
	first := res.Faults[0].StartMs
	var base float64
	var nb int
	for _, p := range series {
		if int64(p.Second)*1000 <= first && p.Second > 2 {
			base += p.Throughput
			nb++
		}
	}
	if nb > 0 {
		base /= float64(nb)
	}
	res.P99BeforeMs = p99Between(rec.history, 2e9, first*1e6)
	for i := range res.Faults {
		f := &res.Faults[i]
		f.Baseline = base
		f.ClientErrors, f.ClientErrorsByKind = clientErrors(rec.history, f.StartMs, f.EndMs)
		startNs := f.StartMs * 1e6
		// Unavailability: for each key, from the injection to the first
		// successful write invoked after it through a node other than the
		// target; the worst key counts.
		firstOK := map[string]int64{}
		keys := map[string]bool{}
		for _, op := range rec.history {
			if op.Kind == checker.Read {
				continue
			}
			if op.Outcome == checker.OK && op.Node != f.Node && op.Call >= startNs && op.Call <= f.EndMs*1e6 {
				f.OtherWritesOK++
			}
			keys[op.Key] = true
			if op.Call >= startNs && op.Outcome == checker.OK && op.Node != f.Node {
				if t, ok := firstOK[op.Key]; !ok || op.Return < t {
					firstOK[op.Key] = op.Return
				}
			}
		}
		for k := range keys {
			t, ok := firstOK[k]
			if !ok {
				t = int64(res.DurationSeconds * 1e9)
			}
			f.UnavailableMs = max(f.UnavailableMs, (t-startNs)/1e6)
		}
		var during float64
		var nd int
		f.RecoveryMs = -1
		for _, p := range series {
			ms := int64(p.Second) * 1000
			if ms > f.StartMs && ms <= f.EndMs {
				during += p.Throughput
				nd++
			}
			if ms > f.EndMs && f.RecoveryMs < 0 && base > 0 && p.Throughput >= 0.9*base {
				f.RecoveryMs = ms - f.EndMs
			}
		}
		if nd > 0 {
			f.ThroughputDuring = during / float64(nd)
		}
		f.HalfBaselineMs = halfBaseline(series, f.StartMs, f.EndMs, base)
		f.P99DuringMs = p99Between(rec.history, f.StartMs*1e6, f.EndMs*1e6)
		if f.SettledMs > f.StartMs {
			f.P99SettlingMs = p99Between(rec.history, f.StartMs*1e6, f.SettledMs*1e6)
			f.ThroughputSettling = meanThroughput(series, f.StartMs, f.SettledMs)
		}
	}
	sort.SliceStable(res.Faults, func(a, b int) bool { return res.Faults[a].StartMs < res.Faults[b].StartMs })
}

// clientErrors counts the register writes and compare-and-sets whose
// outcome the client could not learn, called from startMs to 5 s after
// endMs, in all and by errKind.
func clientErrors(history []checker.Op, startMs, endMs int64) (int, map[string]int) {
	n, byKind := 0, map[string]int{}
	for _, op := range history {
		if op.Kind == checker.Read || op.Outcome != checker.Unknown || op.Call < startMs*1e6 || op.Call > endMs*1e6+5e9 {
			continue
		}
		n++
		byKind[errKind(op.Err)]++
	}
	return n, byKind
}

// halfBaseline: see FaultResult.HalfBaselineMs. A point's second ends at
// Second*1000 ms after the start.
func halfBaseline(series []result.Point, startMs, endMs int64, base float64) int64 {
	at := int64(-1)
	for _, p := range series {
		ms := int64(p.Second) * 1000
		if ms <= startMs || ms > endMs {
			continue
		}
		switch {
		case p.Throughput < base/2:
			at = -1
		case at < 0:
			at = ms - startMs
		}
	}
	return at
}

// Write stores results.json.
func (r *Result) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
}

// freshClusterDir removes dir, the data of an earlier run's nodes in the
// same output directory, so that every run starts a fresh cluster (nodes
// started on an earlier run's data would not form the cluster this run
// asks for); removed tells whether there was one.
func freshClusterDir(dir string) (removed bool, err error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("chaos: removing an earlier run's cluster: %w", err)
	}
	return true, nil
}
