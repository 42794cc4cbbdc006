package main

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/spf13/cobra"
)

// newDebugCmd holds tools that act on a stopped node's files. They are
// hidden: the chaos lab uses them to inject faults.
func newDebugCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Tools on a stopped node's data dir (fault injection)", Hidden: true}
	var (
		dataDir     string
		shardID     uint64
		count, step int
	)
	corrupt := &cobra.Command{
		Use:   "corrupt",
		Short: "Invert the bytes of some user values of one shard in a stopped node's data dir",
		Long: `Invert the bytes of --count user values (every --every-th key) of the
node's replica of --shard, keeping their versions, through the storage
engine: the files stay well-formed and their checksums valid, so only a
scrub comparing the replicas' data finds the damage (docs/scrub.md). The
node must be stopped. Prints the number of values changed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" || shardID == 0 {
				return usageError{errors.New("--data-dir and --shard are required")}
			}
			eng, err := storage.Open(dataDir, storage.Options{})
			if err != nil {
				return err
			}
			defer eng.Close()
			b, err := eng.Get(storage.DescriptorKey(shardID))
			if err != nil {
				return fmt.Errorf("the node holds no replica of shard %d: %w", shardID, err)
			}
			d, err := shard.UnmarshalDescriptor(b)
			if err != nil {
				return err
			}
			keys, err := storage.CorruptValues(eng, d.Start, d.End, count, step)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "corrupted %d values of shard %d\n", len(keys), shardID)
			return nil
		},
	}
	f := corrupt.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the stopped node's data directory")
	f.Uint64Var(&shardID, "shard", 0, "the shard whose values to change")
	f.IntVar(&count, "count", 20, "values to change")
	f.IntVar(&step, "every", 1, "change every n-th key of the shard")
	cmd.AddCommand(corrupt)
	return cmd
}
