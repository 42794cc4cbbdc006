package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	var ttl time.Duration
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
the token is shown this once. With --ttl it works for that long, then is
refused everywhere (its expiry goes to stderr). Needs an admin token (--token, or the environment variable
CAIRN_TOKEN): the first one is made by the node of lowest id at the first
start with --auth, in its DATA-DIR/admin-token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			admin, hc, base, err := setup(cmd)
			if err != nil {
				return err
			}
			if ttl < 0 || ttl > 0 && ttl < time.Second || ttl > auth.MaxTokenTTL {
				return usageError{fmt.Errorf("--ttl %v: want 1s to %v, or 0 for a token that does not expire", ttl, auth.MaxTokenTTL)}
			}
			tok, expires, err := createToken(cmd.Context(), hc, base, admin, role, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			// The id on stderr: scripts take the token from stdout.
			fmt.Fprintln(cmd.ErrOrStderr(), "token id (to revoke it):", auth.TokenID(tok))
			if expires != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "expires:", expires)
			}
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "read", "the token's role: read, write or admin")
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long the token works (e.g. 24h; at most 87600h); 0: until revoked")
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

// createToken asks the node at base for a token of role that works for
// ttl (0: until revoked); it returns the token and when it expires (""
// if never).
func createToken(ctx context.Context, hc *http.Client, base, admin, role string, ttl time.Duration) (string, string, error) {
	var out struct{ Token, Expires string }
	target := strings.TrimRight(base, "/") + auth.TokensPath + "?role=" + url.QueryEscape(role)
	if ttl > 0 {
		target += "&ttl=" + url.QueryEscape(ttl.String())
	}
	err := tokenRequest(ctx, hc, http.MethodPost, target, admin, http.StatusCreated, &out)
	if err == nil && out.Token == "" {
		err = fmt.Errorf("the node answered no token")
	}
	return out.Token, out.Expires, err
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

// hideLongArgs is a flag error that does not echo a long argument: a
// token (or its secret part) that starts with '-' is read as a flag, and
// the parser's message would print it. The message says how to pass it.
func hideLongArgs(_ *cobra.Command, err error) error {
	fields := strings.Fields(err.Error())
	hidden := false
	for i, f := range fields {
		if len(strings.TrimLeft(f, "-")) >= 20 {
			fields[i] = fmt.Sprintf("(an argument of %d characters, not shown)", len(f))
			hidden = true
		}
	}
	msg := strings.Join(fields, " ")
	if hidden {
		msg += "; an argument that starts with '-' is read as a flag: put -- before it"
	}
	return errors.New(msg)
}
