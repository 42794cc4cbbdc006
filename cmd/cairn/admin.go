package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/spf13/cobra"
)

// newAdminCmd is `cairn admin`: membership, replica moves and settings
// through one node's admin API.
func newAdminCmd() *cobra.Command {
	var (
		endpoint string
		timeout  time.Duration
		asJSON   bool
		conn     accessFlags
	)
	cmd := &cobra.Command{Use: "admin", Short: "Change the cluster's membership, move replicas, tune the balancer",
		Long: `Administer a running cluster through one node's admin API (any node:
the membership record is replicated). See docs/operations.md.`}
	cmd.SetFlagErrorFunc(hideLongArgs)
	pf := cmd.PersistentFlags()
	pf.StringVar(&endpoint, "endpoint", "http://127.0.0.1:8080", "URL of any node of the cluster")
	pf.DurationVar(&timeout, "timeout", 10*time.Second, "deadline of the call")
	pf.BoolVar(&asJSON, "json", false, "print the answer as JSON")
	conn.add(pf, "an admin token")
	admin := func() (*client.Admin, error) {
		hc, err := conn.httpClient(endpoint, 0) // each call has its context's deadline
		if err != nil {
			return nil, err
		}
		return client.NewAdmin(endpoint, hc), nil
	}
	call := func(cmd *cobra.Command, f func(ctx context.Context, a *client.Admin) (any, error)) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		a, err := admin()
		if err != nil {
			return err
		}
		out, err := f(ctx, a)
		if err != nil || out == nil {
			return err
		}
		return printJSON(cmd.OutOrStdout(), out)
	}

	node := &cobra.Command{Use: "node", Short: "List, decommission or remove nodes, or set their role"}
	node.AddCommand(&cobra.Command{Use: "list", Short: "List the members, their state and replica counts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			a, err := admin()
			if err != nil {
				return err
			}
			nodes, err := a.Nodes(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), nodes)
			}
			ci, _ := a.Cluster(ctx) // replica and leader counts, if the node answers
			printNodes(cmd.OutOrStdout(), nodes, ci)
			return nil
		}})
	node.AddCommand(&cobra.Command{Use: "decommission ID", Short: "Move every replica off a node, then remove it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("node", args[0])
			if err != nil {
				return err
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) { return a.Decommission(ctx, id) })
		}})
	var dead bool
	remove := &cobra.Command{Use: "remove ID --dead", Short: "Declare a node that will never come back dead; its replicas are replaced", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("node", args[0])
			if err != nil {
				return err
			}
			if !dead {
				return usageError{fmt.Errorf("remove needs --dead (the node will never come back); drain a live node with `cairn admin node decommission %d`", id)}
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) { return a.RemoveDead(ctx, id) })
		}}
	remove.Flags().BoolVar(&dead, "dead", false, "confirm the node is gone for good (its id is never reused)")
	node.AddCommand(remove)
	node.AddCommand(&cobra.Command{Use: "set-role ID voter|read-replica",
		Short: "Make a node a read replica (learners of every shard, no voter) or a voter again", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("node", args[0])
			if err != nil {
				return err
			}
			if args[1] != "voter" && args[1] != "read-replica" {
				return usageError{fmt.Errorf("role %q: want voter or read-replica", args[1])}
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) { return a.SetRole(ctx, id, args[1]) })
		}})

	var from, to uint64
	shardCmd := &cobra.Command{Use: "shard", Short: "Move shard replicas and split shards by hand"}
	move := &cobra.Command{Use: "move ID --from N --to M", Short: "Move a shard's replica from one node to another", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("shard", args[0])
			if err != nil {
				return err
			}
			if from == 0 || to == 0 || from == to {
				return usageError{fmt.Errorf("--from and --to must name two different nodes")}
			}
			if !cmd.Flags().Changed("timeout") {
				timeout = 2 * time.Minute // a move streams a snapshot
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) {
				if err := a.MoveShard(ctx, id, from, to); err != nil {
					return nil, err
				}
				return map[string]any{"shard": id, "from": from, "to": to, "status": "moved"}, nil
			})
		}}
	move.Flags().Uint64Var(&from, "from", 0, "node giving up its replica")
	move.Flags().Uint64Var(&to, "to", 0, "node receiving the replica")
	shardCmd.AddCommand(move)
	shardCmd.AddCommand(&cobra.Command{Use: "split ID", Short: "Split a shard in two halves of its token range (no data is copied)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("shard", args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("timeout") {
				timeout = 30 * time.Second
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) { return a.SplitShard(ctx, id) })
		}})

	var limit int
	var rate int64
	var rebalance bool
	settings := &cobra.Command{Use: "settings [--transfer-limit N] [--snapshot-rate B] [--rebalance=false]", Short: "Show or change the balancer's cluster-wide settings", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s client.Settings
			if cmd.Flags().Changed("transfer-limit") {
				s.TransferLimit = &limit
			}
			if cmd.Flags().Changed("snapshot-rate") {
				s.SnapshotRate = &rate
			}
			if cmd.Flags().Changed("rebalance") {
				s.Rebalance = &rebalance
			}
			return call(cmd, func(ctx context.Context, a *client.Admin) (any, error) {
				if s.TransferLimit == nil && s.SnapshotRate == nil && s.Rebalance == nil {
					n, err := a.Nodes(ctx)
					return n.Settings, err
				}
				return a.SetSettings(ctx, s)
			})
		}}
	settings.Flags().IntVar(&limit, "transfer-limit", 2, "replica moves touching one node at once")
	settings.Flags().Int64Var(&rate, "snapshot-rate", 0, "snapshot streaming bound per node, bytes/s (0: unlimited)")
	settings.Flags().BoolVar(&rebalance, "rebalance", true, "false stops rebalancing moves (repairs of dead or draining nodes go on)")

	cmd.AddCommand(node, shardCmd, settings, newTokenCmd(&conn))
	return cmd
}

func parseID(what, s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("%s id %q: want a positive integer", what, s)}
	}
	return id, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printNodes prints the members as a table, with each one's replica and
// leader counts from the shard map of ci (when the node gave one).
func printNodes(w io.Writer, n client.Nodes, ci client.ClusterInfo) {
	replicas, learners, leaders := map[uint64]int{}, map[uint64]int{}, map[uint64]int{}
	for _, s := range ci.Shards {
		for _, r := range s.Replicas {
			replicas[r]++
		}
		for _, r := range s.Learners {
			learners[r]++
		}
		leaders[s.Leader]++
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tROLE\tHTTP\tPEER\tREPLICAS\tLEARNERS\tLEADERS")
	for _, m := range n.Members {
		role := m.Role
		if role == "" {
			role = "voter"
		}
		if m.DropLearners {
			role += " (dropping learners)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", m.ID, m.State, role, m.HTTPAddr, m.PeerAddr, replicas[m.ID], learners[m.ID], leaders[m.ID])
	}
	_ = tw.Flush()
	b := n.Balancer
	if b.Leading {
		fmt.Fprintf(w, "balancer: runs on this node; %d moves in flight, %d done\n", len(b.InFlight), b.Moved)
	}
}
