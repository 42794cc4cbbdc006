package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/lab/checker"
	"github.com/cairn-db/cairn/internal/lab/result"
)

// ExternalConfig describes a chaos run against a cluster the lab did not
// start itself — containers on a private Docker network, say — whose
// faults the caller makes (disconnecting a container, killing it). The
// workload and every check are those of Run. RunExternal fills its
// defaults and validates it.
type ExternalConfig struct {
	// Endpoints are the nodes' client URLs, node i+1 at Endpoints[i].
	// Required.
	Endpoints []string
	// Duration of the workload. Default 40 s.
	Duration time.Duration
	// Workload shapes the recorded clients.
	Workload WorkloadConfig
	// Faults run in order of At; each is healed For after it starts.
	Faults []ExternalFault
	// Dir receives history.json and linearizability.html. Required.
	Dir string
	// Scenario names the run in its result. Default "external".
	Scenario string
	// Progress, when set, receives one line per step.
	Progress io.Writer
	// Ready bounds the wait for every shard to have a leader, before the
	// workload and after healing. Default 60 s.
	Ready time.Duration
}

// ExternalFault is a fault the caller makes: Inject at At after the
// workload starts and Heal For later, against node Node (1-based).
type ExternalFault struct {
	Kind, Param string
	Node        int
	At, For     time.Duration
	Inject      func() error
	Heal        func() error
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c ExternalConfig) EnsureDefaults() ExternalConfig {
	if c.Duration == 0 {
		c.Duration = 40 * time.Second
	}
	if c.Scenario == "" {
		c.Scenario = "external"
	}
	if c.Ready == 0 {
		c.Ready = 60 * time.Second
	}
	c.Workload = c.Workload.EnsureDefaults()
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c ExternalConfig) Validate() error {
	switch {
	case len(c.Endpoints) == 0:
		return fmt.Errorf("%w: Endpoints: want at least one", ErrInvalidConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	case c.Duration <= 0 || c.Ready <= 0:
		return fmt.Errorf("%w: Duration %v and Ready %v: want more than 0", ErrInvalidConfig, c.Duration, c.Ready)
	}
	for i, f := range c.Faults {
		if f.Inject == nil || f.Heal == nil || f.Node < 1 || f.Node > len(c.Endpoints) || f.At < 0 || f.For <= 0 || f.At+f.For > c.Duration {
			return fmt.Errorf("%w: fault %d (%s): needs Inject, Heal, a node in 1..%d and to end within the run", ErrInvalidConfig, i, f.Kind, len(c.Endpoints))
		}
	}
	return c.Workload.Validate()
}

// RunExternal records the workload against cfg.Endpoints while the
// faults run, then checks the history like Run: linearizable per key, no
// acknowledged write lost, replicas converged.
func RunExternal(ctx context.Context, cfg ExternalConfig) (*Result, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	if err := waitEndpointsReady(ctx, cfg.Endpoints, cfg.Ready); err != nil {
		return nil, err
	}
	logf("cluster of %d nodes ready; running %s for %v", len(cfg.Endpoints), cfg.Scenario, cfg.Duration)
	start := time.Now()
	rec := &recorder{start: start, acked: map[string]string{}, perf: result.NewRecorder(start, nil)}
	wctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	wait := startWorkload(wctx, rec, cfg.Endpoints, cfg.Workload, PreloadConfig{}, plainClients)
	faults := runExternalFaults(wctx, cfg.Faults, start, logf)
	wait()
	elapsed := time.Since(start)
	if err := waitEndpointsReady(ctx, cfg.Endpoints, cfg.Ready); err != nil {
		return nil, fmt.Errorf("after healing: %w", err)
	}
	res := &Result{Scenario: cfg.Scenario, DurationSeconds: elapsed.Seconds(), Faults: faults, Partitions: "external"}
	hashes := func(i int) ([]checker.ShardHash, error) { return endpointHashes(ctx, cfg.Endpoints[i-1]) }
	err := checkRun(res, rec, elapsed, cfg.Dir, cfg.Endpoints, plainClients, len(cfg.Endpoints), hashes, logf)
	return res, err
}

// startWorkload starts the register clients (client i talks to node
// i mod n first and fails over to the others; a share of their operations
// go to the preloaded records, if any) and the unique-write set; the
// returned function waits for them to stop, when ctx ends.
func startWorkload(ctx context.Context, rec *recorder, endpoints []string, w WorkloadConfig, p PreloadConfig, opts clientOpts) (wait func()) {
	var keys []string
	for i := 0; i < w.Keys; i++ {
		keys = append(keys, fmt.Sprintf("reg/%d", i))
	}
	var wg sync.WaitGroup
	var setClients []*client.Client
	for i := 0; i < w.Clients; i++ {
		node := i%len(endpoints) + 1
		eps := append([]string{endpoints[node-1]}, without(endpoints, endpoints[node-1])...)
		cl, _ := client.New(eps, opts(w.Timeout))
		setClients = append(setClients, cl)
		wg.Add(1)
		go func(i, node int) {
			defer wg.Done()
			runRegisters(ctx, rec, cl, i, node, keys, int64(i+1), p)
		}(i, node)
	}
	wg.Add(1)
	go func() { defer wg.Done(); runSet(ctx, rec, setClients) }()
	if w.IndexKeys > 0 {
		rec.indexed = true
		for i := range endpoints {
			eps := append([]string{endpoints[i]}, without(endpoints, endpoints[i])...)
			cl, _ := client.New(eps, opts(w.Timeout))
			wg.Add(1)
			go func() {
				defer wg.Done()
				runIndexed(ctx, rec, cl, i, len(endpoints), w.IndexKeys, int64(1000+i))
			}()
		}
	}
	return wg.Wait
}

// clientOpts makes the options of the lab's clients of a cluster, with an
// operation timeout (TLS settings included for a secure cluster).
type clientOpts func(timeout time.Duration) client.Options

// plainClients are the options of clients of a plain-HTTP cluster.
func plainClients(timeout time.Duration) client.Options { return client.Options{Timeout: timeout} }

// runExternalFaults injects and heals each fault on schedule; a fault
// whose injection fails is recorded with its error and not healed.
func runExternalFaults(ctx context.Context, faults []ExternalFault, start time.Time, logf func(string, ...any)) []FaultResult {
	var out []FaultResult
	for _, f := range faults {
		if !sleepUntil(ctx, start.Add(f.At)) {
			break
		}
		fr := FaultResult{Kind: f.Kind, Param: f.Param, Target: fmt.Sprintf("node:%d", f.Node), Node: f.Node, StartMs: time.Since(start).Milliseconds(), TargetLeadsBefore: -1, TargetLeadsEnd: -1}
		logf("%s %s on node %d", f.Kind, f.Param, f.Node)
		if err := f.Inject(); err != nil {
			fr.Error = err.Error()
			fr.EndMs = fr.StartMs
			out = append(out, fr)
			continue
		}
		sleepUntil(ctx, start.Add(f.At+f.For))
		if err := f.Heal(); err != nil {
			fr.Error = "heal: " + err.Error()
		}
		fr.EndMs = time.Since(start).Milliseconds()
		logf("healed %s on node %d", f.Kind, f.Node)
		out = append(out, fr)
	}
	return out
}

// checkRun fills res from the recorded history: throughput, errors,
// per-fault figures, linearizability (history and visualization written
// to dir), lost acknowledged writes (read through endpoints) and replica
// convergence (hashes of nodes 1..n).
func checkRun(res *Result, rec *recorder, elapsed time.Duration, dir string, endpoints []string, opts clientOpts, n int,
	hashes func(i int) ([]checker.ShardHash, error), logf func(string, ...any)) error {
	all, _ := rec.perf.Results(elapsed)
	res.Ops, res.Series = len(rec.history), all.Series
	res.Throughput, res.P99Ms = all.Throughput, all.Latency.P99
	res.ClientErrors = map[string]uint64{}
	rec.mu.Lock()
	for k, v := range rec.errKinds {
		res.ClientErrors[k] = v
	}
	rec.mu.Unlock()
	measureFaults(res, rec, rec.start)

	logf("checking %d operations for linearizability…", len(rec.history))
	hist, _ := json.Marshal(rec.history)
	_ = os.WriteFile(filepath.Join(dir, "history.json"), hist, 0o644)
	ok, timedOut, err := checker.Linearizable(rec.history, 2*time.Minute, filepath.Join(dir, "linearizability.html"))
	if err != nil {
		logf("writing the visualization: %v", err)
	}
	res.Linearizable, res.CheckTimedOut = ok, timedOut
	res.AppliedTwice = checker.AppliedTwice(rec.history)
	if res.AppliedTwice == nil {
		res.AppliedTwice = []string{}
	}

	cl, _ := client.New(endpoints, opts(10*time.Second))
	lost, err := checker.LostWrites(rec.acked, func(k string) (string, bool, error) {
		v, err := cl.Get(context.Background(), []byte(k), false)
		if errors.Is(err, client.ErrNotFound) {
			return "", false, nil
		}
		return string(v.Value), err == nil, err
	})
	res.AckedWrites, res.LostWrites, res.LostKeys = len(rec.acked), len(lost), lost
	if err != nil {
		// The healed cluster did not answer a read: the run fails, and
		// the other checks still run (and the next scenario after it).
		res.ReadBackError = err.Error()
		logf("reading the acknowledged writes back: %v", err)
	}
	if rec.indexed {
		logf("checking %d indexed writes with index queries…", len(rec.indexWrites))
		res.Index = checkIndex(rec.indexWrites, cl)
	}
	res.Diverged = convergeWith(n, hashes, 30*time.Second)
	res.ReplicasConverged = len(res.Diverged) == 0
	return nil
}

// convergeWith waits until every shard's replicas on nodes 1..n report
// the same data hash and returns the shards that still differ at the
// deadline: timeout plus three times the first round of hashes (a round
// reads every replica's data, which takes a while with preloaded records).
func convergeWith(n int, hashes func(i int) ([]checker.ShardHash, error), timeout time.Duration) []string {
	start := time.Now()
	deadline := start.Add(timeout)
	for round := 0; ; round++ {
		if round == 1 {
			deadline = deadline.Add(3 * time.Since(start))
		}
		byNode := map[int][]checker.ShardHash{}
		var err error
		for i := 1; i <= n; i++ {
			if byNode[i], err = hashes(i); err != nil {
				break
			}
		}
		bad := []string(nil)
		if err != nil {
			bad = []string{err.Error()}
		} else {
			bad = checker.Diverged(byNode)
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func endpointHashes(ctx context.Context, endpoint string) ([]checker.ShardHash, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hs, err := client.NewAdmin(endpoint, nil).Hashes(ctx)
	out := make([]checker.ShardHash, len(hs))
	for j, h := range hs {
		out[j] = checker.ShardHash(h)
	}
	return out, err
}

// waitEndpointsReady waits until every endpoint answers and sees a
// leader, among the endpoints' nodes, for every shard.
func waitEndpointsReady(ctx context.Context, endpoints []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		why := endpointsNotReady(ctx, endpoints)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: cluster not ready after %v: %s", timeout, why)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func endpointsNotReady(ctx context.Context, endpoints []string) string {
	for i, ep := range endpoints {
		ci, err := client.NewAdmin(ep, nil).Cluster(ctx)
		if err != nil {
			return fmt.Sprintf("node %d: %v", i+1, err)
		}
		if len(ci.Shards) == 0 {
			return fmt.Sprintf("node %d reports no shards", i+1)
		}
		var leaderless []string
		for _, s := range ci.Shards {
			if s.Leader < 1 || int(s.Leader) > len(endpoints) {
				leaderless = append(leaderless, fmt.Sprint(s.ID))
			}
		}
		if len(leaderless) > 0 {
			return fmt.Sprintf("node %d sees no leader of shards %s", i+1, strings.Join(leaderless, ","))
		}
	}
	return ""
}
