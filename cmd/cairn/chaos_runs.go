package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/lab/chaos"
	"github.com/cairn-db/cairn/internal/lab/report"
	"github.com/spf13/cobra"
)

// runOpts are the settings every run of one cairn chaos shares.
type runOpts struct {
	bin                  string
	d                    time.Duration
	nodes, clients, keys int
	partitions           string
	runs                 int
	preload              int64 // -1: the scenario's default
	valueSize            int
	indexKeys            int
	transferLimit        int   // 0: the nodes' default
	snapshotRate         int64 // negative: the nodes' default
	shards               int   // 0: one per node
	etcd                 bool  // the workload speaks the etcd API (--client etcd)
	portBase             int   // 0: free ports
}

// runRepeated runs s o.runs times on fresh clusters (dir/run-N when more
// than one) and, for more than one, writes the pass rate and the metrics'
// medians and spreads to dir/results.json. ok: every run passed.
func runRepeated(ctx context.Context, cmd *cobra.Command, s chaos.Scenario, dir string, o runOpts) (bool, error) {
	rep, err := repeat(ctx, cmd, s, dir, o)
	if err != nil {
		return false, err
	}
	return rep.Passed == rep.Runs-rep.Skipped, nil
}

func repeat(ctx context.Context, cmd *cobra.Command, s chaos.Scenario, dir string, o runOpts) (chaos.Repeated, error) {
	var runs []chaos.RunSummary
	for i := 1; i <= o.runs; i++ {
		rdir := dir
		if o.runs > 1 {
			rdir = filepath.Join(dir, fmt.Sprintf("run-%d", i))
			fmt.Fprintf(cmd.ErrOrStderr(), "-- %s: run %d of %d\n", s.Name, i, o.runs)
		}
		r, err := runScenario(ctx, cmd, s, rdir, o)
		if err != nil {
			return chaos.Repeated{}, err
		}
		runs = append(runs, r.Summarize(rdir))
		if ctx.Err() != nil {
			break
		}
	}
	rep := chaos.SummarizeRuns(s.Name, runs)
	if o.runs > 1 {
		if err := chaos.WriteJSON(dir, rep); err != nil {
			return rep, err
		}
		printRepeated(cmd, rep)
	}
	return rep, nil
}

func printRepeated(cmd *cobra.Command, rep chaos.Repeated) {
	w := cmd.OutOrStdout()
	name := rep.Scenario
	if rep.Setting != "" && !strings.Contains(name, rep.Setting) {
		name += " " + rep.Setting
	}
	fmt.Fprintf(w, "%s: passed %d of %d runs (%.0f %%, 95 %% interval %.0f–%.0f %%)", name, rep.Passed, rep.Runs-rep.Skipped,
		100*rep.PassRate, 100*rep.PassRateCI95[0], 100*rep.PassRateCI95[1])
	if rep.Skipped > 0 {
		fmt.Fprintf(w, ", %d skipped", rep.Skipped)
	}
	fmt.Fprintln(w)
	for _, m := range rep.MetricNames() {
		st := rep.Metrics[m]
		fmt.Fprintf(w, "  %-18s median %10.1f  IQR %10.1f–%-10.1f  min %10.1f  max %10.1f\n", m, st.Median, st.Q1, st.Q3, st.Min, st.Max)
	}
}

// runSweep runs one fault at each setting (repeated o.runs times each)
// into out/KIND=V, writes the Sweep to out/results.json and charts
// throughput and p99 while the fault lasted against the setting.
func runSweep(ctx context.Context, cmd *cobra.Command, kind string, values []float64, target string, sched chaos.Schedule, out string, o runOpts) error {
	sw := chaos.Sweep{Kind: chaos.KindSweep, Fault: kind, Target: target}
	failed := 0
	for _, v := range values {
		spec := chaos.SweepFault(kind, v)
		s, err := customScenario(spec, target, sched)
		if err != nil {
			return usageError{err}
		}
		s.Name = "sweep " + spec
		sw.Scenario = "sweep " + kind
		rep, err := repeat(ctx, cmd, s, filepath.Join(out, spec), o)
		if err != nil {
			return err
		}
		rep.Setting, rep.Value = spec, v
		if o.runs == 1 {
			printRepeated(cmd, rep)
		}
		failed += rep.Runs - rep.Skipped - rep.Passed
		sw.Points = append(sw.Points, rep)
		if ctx.Err() != nil {
			break
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := chaos.WriteJSON(out, sw); err != nil {
		return err
	}
	for name, svg := range report.SweepCharts(sw) {
		_ = os.WriteFile(filepath.Join(out, name), []byte(svg), 0o644)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "sweep of %s written to %s (%s)\n", kind, out, strings.Join([]string{"results.json", "sweep-throughput.svg", "sweep-p99.svg"}, ", "))
	if failed > 0 {
		return fmt.Errorf("%d run(s) of the sweep failed a check", failed)
	}
	return nil
}

// snapshotRateOpt is --snapshot-rate for chaos.Config: nil when not given.
func (o runOpts) snapshotRateOpt() *int64 {
	if o.snapshotRate < 0 {
		return nil
	}
	r := o.snapshotRate
	return &r
}
