package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/internal/backup"
)

func newBackupCmd() *cobra.Command {
	var (
		cfg backup.Config
		acc accessFlags
	)
	cmd := &cobra.Command{
		Use:   "backup --endpoint URL --to DIR",
		Short: "Take a hot backup of a running cluster",
		Long: `Take a hot backup of a running cluster: every shard's data at one applied
index, read from one replica after a read index (so every write acknowledged
before the backup started is in it), with a manifest of checksums. The
cluster keeps serving; DIR must not exist or be empty. The backup is
written beside DIR (inside it when it exists) and put in place once
complete: a backup that fails or is interrupted (Ctrl-C, SIGTERM) leaves
DIR as it was.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			cfg.Progress = cmd.ErrOrStderr()
			var err error
			if cfg.Access, err = acc.access(cfg.Endpoint); err != nil {
				return err
			}
			// Interrupted, the backup removes what it wrote; a second
			// signal stops the process at once.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, stop)
			m, err := backup.Backup(ctx, cfg)
			if err != nil && ctx.Err() != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup of %d shards, %d keys, %d bytes in %s: %v\n",
				len(m.Shards), m.Keys(), m.Bytes(), cfg.Dir, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Endpoint, "endpoint", "http://127.0.0.1:8080", "any node of the cluster")
	f.StringVar(&cfg.Dir, "to", "", "directory to write the backup to (required; must not exist or be empty)")
	f.IntVar(&cfg.Parallel, "parallel", 2, "shards streamed at once")
	acc.add(cmd.Flags(), "an admin token")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newRestoreCmd() *cobra.Command {
	var (
		cfg       backup.RestoreConfig
		endpoints string
		verify    bool
		acc       accessFlags
	)
	cmd := &cobra.Command{
		Use:   "restore --from DIR --endpoints URL[,URL…]",
		Short: "Verify a backup and write it into a cluster",
		Long: `Verify a backup (manifest, checksums, every stream's end), then write every
key into the cluster at --endpoints through ordinary replicated writes: the
target may have any number of nodes and shards. Values are restored; versions
are the target's own. --verify-only stops after the check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verify {
				m, err := backup.Verify(cfg.Dir)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "backup in %s is whole: %d shards, %d keys, %d bytes, taken %s\n",
					cfg.Dir, len(m.Shards), m.Keys(), m.Bytes(), m.Started.Format(time.RFC3339))
				return nil
			}
			start := time.Now()
			cfg.Endpoints = strings.Split(endpoints, ",")
			var err error
			if cfg.Access, err = acc.access(cfg.Endpoints...); err != nil {
				return err
			}
			cfg.Progress = cmd.ErrOrStderr()
			st, err := backup.Restore(cmd.Context(), cfg)
			if errors.Is(err, backup.ErrUnrestorable) {
				return fmt.Errorf("%w; --skip-etcd-zero-keys restores the rest without them", err)
			}
			if errors.Is(err, backup.ErrTargetNotEmpty) {
				return fmt.Errorf("%w; --into-nonempty writes into it, overwriting the keys the backup holds", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d keys from %s in %v (%d of Cairn's own records skipped, %d records superseded by a shard taken after a split, %d etcd keys beginning with byte 0x00 skipped, %d keys of etcd leases skipped)\n",
				st.Keys, cfg.Dir, time.Since(start).Round(time.Millisecond), st.Reserved, st.Superseded, st.EtcdZeroKeys, st.Leased)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "from", "", "backup directory (required)")
	f.StringVar(&endpoints, "endpoints", "http://127.0.0.1:8080", "target cluster's nodes, comma separated")
	f.IntVar(&cfg.Workers, "workers", 64, "writes in flight")
	f.BoolVar(&verify, "verify-only", false, "only check the backup")
	f.BoolVar(&cfg.IntoNonEmpty, "into-nonempty", false, "write into a target that already holds keys (default: refused before anything is written)")
	f.BoolVar(&cfg.SkipEtcdZeroKeys, "skip-etcd-zero-keys", false, "restore a backup holding etcd keys that begin with byte 0x00 without them (restore cannot write them; without this flag such a backup is refused)")
	acc.add(cmd.Flags(), "a write token")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
