package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/spf13/cobra"
)

// newTokenCmd is `token create --role R`: it asks a node (with an admin
// token) to make a bearer token of a role and prints it. It is meant to
// sit under `cairn admin`.
func newTokenCmd() *cobra.Command {
	var endpoint, token, role, ca, cert, key string
	var timeout time.Duration
	cmd := &cobra.Command{Use: "token", Short: "Manage the bearer tokens of a cluster started with --auth"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token of a role (read, write or admin) and print it",
		Long: `Create a bearer token of a role and print it. The cluster stores only its
SHA-256; the token is shown this once. Needs an admin token (--token, or
the environment variable CAIRN_TOKEN): the first one is made by the node of
lowest id at the first start with --auth, in its DATA-DIR/admin-token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				return usageError{fmt.Errorf("--token (an admin token) is required")}
			}
			hc := &http.Client{Timeout: timeout}
			if ca != "" || cert != "" || key != "" {
				cfg, err := client.LoadTLS(ca, cert, key)
				if err != nil {
					return usageError{err}
				}
				hc.Transport = &http.Transport{TLSClientConfig: cfg}
			}
			if f := cmd.Flags().Lookup("endpoint"); f != nil {
				endpoint = f.Value.String() // cairn admin's --endpoint
			}
			tok, err := createToken(cmd.Context(), hc, normalizeEndpoint(endpoint), token, role)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&role, "role", "read", "the token's role: read, write or admin")
	f.StringVar(&token, "token", "", "an admin token (default: $CAIRN_TOKEN)")
	f.StringVar(&ca, "ca", "", "https:// endpoint: the CA that signed the nodes' certificates")
	f.StringVar(&cert, "cert", "", "client certificate for nodes started with --tls-client-auth")
	f.StringVar(&key, "key", "", "private key of --cert")
	timeout = 10 * time.Second
	cmd.AddCommand(create)
	return cmd
}

// createToken asks the node at base for a token of role.
func createToken(ctx context.Context, hc *http.Client, base, admin, role string) (string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/admin/tokens?role="+url.QueryEscape(role), http.NoBody)
	if err != nil {
		return "", usageError{err}
	}
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var out struct{ Token, Role, Error, Message string }
	_ = json.Unmarshal(b, &out)
	if resp.StatusCode != http.StatusCreated || out.Token == "" {
		if out.Message != "" {
			return "", fmt.Errorf("%d %s: %s", resp.StatusCode, out.Error, out.Message)
		}
		return "", fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return out.Token, nil
}
