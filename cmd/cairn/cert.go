package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/security"
	"github.com/spf13/cobra"
)

// newCertCmd is `cairn cert`: a CA and certificates for a local cluster,
// made with Go's crypto/x509 (ECDSA P-256), no openssl needed.
func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Create a CA and the certificates of nodes and clients",
		Long: `Create the certificates a Cairn cluster needs for TLS (ECDSA P-256, made
with Go's crypto/x509):

  cairn cert init   --dir D                     CA: D/ca.crt, D/ca.key (10 years)
  cairn cert node   --dir D --node-id N --hosts 127.0.0.1,localhost,…
                                                 D/node-N.crt, D/node-N.key (1 year;
                                                 server and client usage: the client
                                                 port and mutual TLS between nodes)
  cairn cert client --dir D --name NAME         D/client-NAME.crt, .key (1 year;
                                                 client usage: --tls-client-auth)

Keys are written with mode 0600. Keep ca.key off the nodes: only cairn
cert needs it. A node certificate must name every host name and address
the node is reached by (its client and peer addresses).`,
	}
	var dir string
	cmd.PersistentFlags().StringVar(&dir, "dir", "./cairn-certs", "directory of the CA and the certificates")
	cmd.AddCommand(&cobra.Command{
		Use: "init", Short: "Create the cluster CA (refuses to replace one)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := security.InitCA(dir, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA certificate %s\nCA key         %s (keep it secret; nodes do not need it)\n", p.Cert, p.Key)
			return nil
		},
	})
	var nodeID uint64
	var hosts string
	node := &cobra.Command{
		Use: "node", Short: "Create a node's certificate, signed by the CA", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodeID == 0 {
				return usageError{fmt.Errorf("--node-id is required (a positive integer)")}
			}
			p, err := security.IssueNode(dir, nodeID, splitList(hosts), time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %d certificate %s\nnode %d key         %s\n", nodeID, p.Cert, nodeID, p.Key)
			return nil
		},
	}
	node.Flags().Uint64Var(&nodeID, "node-id", 0, "the node's id (required)")
	node.Flags().StringVar(&hosts, "hosts", "127.0.0.1,localhost", "host names and IP addresses the node is reached by, comma separated")
	var name string
	client := &cobra.Command{
		Use: "client", Short: "Create a client certificate, signed by the CA", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := security.IssueClient(dir, name, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "client %s certificate %s\nclient %s key         %s\n", name, p.Cert, name, p.Key)
			return nil
		},
	}
	client.Flags().StringVar(&name, "name", "", "the client's name (its certificate's common name)")
	_ = client.MarkFlagRequired("name")
	cmd.AddCommand(node, client)
	return cmd
}

// splitList splits a comma separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
