// Command cairn is Cairn's one binary: a database node (serve), a local
// cluster launcher (demo), a client (kv) and, later, the lab.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	var logFormat, logLevel string
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: a replicated, sharded key-value database and its test lab",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			return setupLogging(logFormat, logLevel)
		},
	}
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(newServeCmd(), newDemoCmd(), newKVCmd(), newAdminCmd(), newBenchCmd(), newReportCmd(), newChaosCmd(), newBackupCmd(), newRestoreCmd(), newCertCmd(), newDebugCmd(), &cobra.Command{
		Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "cairn", version) },
	})
	return root
}

func setupLogging(format, level string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: %w", level, err)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, opts)))
	case "json":
		slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, opts)))
	default:
		return usageError{fmt.Errorf("--log-format must be text or json, not %q", format)}
	}
	return nil
}

// usageError marks errors that exit with status 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	if strings.Contains(err.Error(), "unknown flag") || strings.Contains(err.Error(), "unknown command") ||
		strings.Contains(err.Error(), "accepts ") || strings.Contains(err.Error(), "requires ") {
		return 2
	}
	return 1
}
