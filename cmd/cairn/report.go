package main

import (
	"fmt"

	"github.com/cairn-db/cairn/internal/lab/report"
	"github.com/spf13/cobra"
)

func newReportCmd() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "report DIR... --out RDIR",
		Short: "Turn bench result directories into report.md, report.html and charts",
		Long: `Read the results.json of each DIR and write RDIR/report.md, RDIR/report.html
and SVG charts: throughput and p99 over time, throughput–latency curves for
sweeps, side-by-side bars, and a before/after table against the first DIR.
Runs labelled "<system> <case>" (cairn bench --label) are compared per case.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if out == "" {
				return usageError{fmt.Errorf("--out is required")}
			}
			if err := report.Build(dirs, out, title); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report written to %s/report.md and %s/report.html\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory (required)")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	return cmd
}
