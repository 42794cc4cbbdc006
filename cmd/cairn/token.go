package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/spf13/cobra"
)

// newTokenCmd is `token create --role R` and `token revoke ID`: it asks
// a node (with an admin token) to make a bearer token of a role, or to
// revoke one. It is meant to sit under `cairn admin`.
func newTokenCmd(conn *accessFlags) *cobra.Command {
	var role string
	timeout := 10 * time.Second
	cmd := &cobra.Command{Use: "token", Short: "Manage the bearer tokens of a cluster started with --auth"}
	// setup returns the admin token, a client and the node's base URL
	// (cairn admin's --endpoint).
	setup := func(cmd *cobra.Command) (string, *http.Client, string, error) {
		admin := conn.bearer()
		if admin == "" {
			return "", nil, "", usageError{fmt.Errorf("--token (an admin token) or $CAIRN_TOKEN is required")}
		}
		endpoint := ""
		if fl := cmd.Flags().Lookup("endpoint"); fl != nil {
			endpoint = fl.Value.String()
		}
		hc, err := conn.httpClient(endpoint, timeout)
		if err != nil {
			return "", nil, "", err
		}
		return admin, hc, normalizeEndpoint(endpoint), nil
	}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token of a role (read, write or admin) and print it",
		Long: `Create a bearer token of a role and print it (its id, which names it to
revoke it, goes to stderr). The cluster stores only its SHA-256 (the id);
the token is shown this once. Needs an admin token (--token, or the environment variable
CAIRN_TOKEN): the first one is made by the node of lowest id at the first
start with --auth, in its DATA-DIR/admin-token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			admin, hc, base, err := setup(cmd)
			if err != nil {
				return err
			}
			tok, err := createToken(cmd.Context(), hc, base, admin, role)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			// The id on stderr: scripts take the token from stdout.
			fmt.Fprintln(cmd.ErrOrStderr(), "token id (to revoke it):", auth.TokenID(tok))
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "read", "the token's role: read, write or admin")
	revoke := &cobra.Command{
		Use:   "revoke ID|TOKEN",
		Short: "Revoke a token, named by its id or by the token itself",
		Long: `Revoke a token: it is refused on every node within 5 seconds. Name it
by its id (64 hex digits, printed when it was made) or by the token itself,
whose id is computed here (the token is not sent). A request cannot revoke
the token it is made with: make another admin token first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			admin, hc, base, err := setup(cmd)
			if err != nil {
				return err
			}
			// Anything but an id stays here: the argument may be a token
			// (with spaces around it, or a part of one), which must not
			// go into a URL or an error message.
			id := strings.TrimSpace(args[0])
			if strings.HasPrefix(id, "cairn_") {
				id = auth.TokenID(id)
			}
			if b, err := hex.DecodeString(id); err != nil || len(b) != 32 {
				return usageError{fmt.Errorf("the argument is neither a token id (64 hex digits) nor a token (cairn_…)")}
			}
			id = strings.ToLower(id)
			if err := revokeToken(cmd.Context(), hc, base, admin, id); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "revoked", id)
			return nil
		},
	}
	cmd.AddCommand(create, revoke)
	return cmd
}

// createToken asks the node at base for a token of role.
func createToken(ctx context.Context, hc *http.Client, base, admin, role string) (string, error) {
	var out struct{ Token string }
	err := tokenRequest(ctx, hc, http.MethodPost, strings.TrimRight(base, "/")+auth.TokensPath+"?role="+url.QueryEscape(role), admin, http.StatusCreated, &out)
	if err == nil && out.Token == "" {
		err = fmt.Errorf("the node answered no token")
	}
	return out.Token, err
}

// revokeToken asks the node at base to revoke the token of id.
func revokeToken(ctx context.Context, hc *http.Client, base, admin, id string) error {
	return tokenRequest(ctx, hc, http.MethodDelete, strings.TrimRight(base, "/")+auth.TokensPath+"/"+url.PathEscape(id), admin, http.StatusOK, nil)
}

// tokenRequest sends method target with the admin token and decodes a
// want answer into out (when not nil); another status is an error
// naming the node's message.
func tokenRequest(ctx context.Context, hc *http.Client, method, target, admin string, want int, out any) error {
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, http.NoBody)
	if err != nil {
		return usageError{err}
	}
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != want {
		var e struct{ Error, Message string }
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return fmt.Errorf("%d %s: %s", resp.StatusCode, e.Error, e.Message)
		}
		return fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("the node's answer: %w", err)
		}
	}
	return nil
}
