package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

type kvOpts struct {
	endpoints    string
	serializable bool
	ifMatch      uint64
	ifAbsent     bool
	timeout      time.Duration
	verbose      bool
	// acc: TLS and the bearer token (access.go).
	acc accessFlags
}

func newKVCmd() *cobra.Command {
	var o kvOpts
	cmd := &cobra.Command{Use: "kv", Short: "Read and write keys through the v1 HTTP API"}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.endpoints, "endpoints", "http://127.0.0.1:8080,http://127.0.0.1:8081,http://127.0.0.1:8082", "node URLs; the client fails over between them")
	pf.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of the operation, retries included")
	pf.BoolVarP(&o.verbose, "verbose", "v", false, "print the version on stderr")
	o.acc.add(pf, "a read token, or a write token to write")
	get := &cobra.Command{Use: "get KEY", Short: "Print a key's value", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := o.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			v, err := c.Get(ctx, []byte(args[0]), o.serializable)
			if err != nil {
				return o.kvErr(ctx, err)
			}
			if o.verbose {
				fmt.Fprintln(cmd.ErrOrStderr(), "version", v.Version)
			}
			_, err = cmd.OutOrStdout().Write(forTerminal(cmd.OutOrStdout(), v.Value))
			return err
		}}
	get.Flags().BoolVar(&o.serializable, "serializable", false, "read from one replica (may be stale)")
	put := &cobra.Command{Use: "put KEY VALUE", Short: "Write a key (VALUE - reads stdin); prints the new version", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			val := []byte(args[1])
			if args[1] == "-" {
				var err error
				if val, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			c, ctx, done, err := o.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ver, err := c.Put(ctx, []byte(args[0]), val, client.PutOptions{IfVersion: o.ifMatch, IfAbsent: o.ifAbsent})
			if err != nil {
				return o.kvErr(ctx, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), ver)
			return nil
		}}
	put.Flags().Uint64Var(&o.ifMatch, "if-match", 0, "write only if the current version is N")
	put.Flags().BoolVar(&o.ifAbsent, "if-absent", false, "write only if the key does not exist")
	del := &cobra.Command{Use: "del KEY", Short: "Delete a key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, done, err := o.client(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := c.Delete(ctx, []byte(args[0]), o.ifMatch); err != nil {
				return o.kvErr(ctx, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "deleted")
			return nil
		}}
	del.Flags().Uint64Var(&o.ifMatch, "if-match", 0, "delete only if the current version is N")
	cmd.AddCommand(get, put, del)
	return cmd
}

// client returns a client of the endpoints and the context of one
// operation: it ends (cause errUnreachable) as soon as every endpoint has
// refused a connection, so that a command with no node listening fails at
// once instead of retrying until its deadline. done releases it.
func (o *kvOpts) client(parent context.Context) (*client.Client, context.Context, func(), error) {
	eps := strings.Split(o.endpoints, ",")
	ctx, cancel := context.WithCancelCause(parent)
	hosts := map[string]bool{}
	for _, e := range eps {
		if u, err := url.Parse(normalizeEndpoint(e)); err == nil {
			hosts[u.Host] = true
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg, err := o.acc.tls(normalizedAll(eps)...)
	if err != nil {
		cancel(nil)
		return nil, nil, nil, err
	}
	tr.TLSClientConfig = cfg
	var next http.RoundTripper = tr
	if tok := o.acc.bearer(); tok != "" {
		next = client.WithToken(tr, tok)
	}
	rt := &refusals{next: next, hosts: max(1, len(hosts)), refused: map[string]bool{}, cancel: cancel}
	c, err := client.New(eps, client.Options{Timeout: o.timeout, HTTP: &http.Client{Transport: rt}})
	if err != nil {
		cancel(nil)
		return nil, nil, nil, usageError{err}
	}
	return c, ctx, func() { cancel(nil) }, nil
}

// errUnreachable ends an operation whose every endpoint refused the
// connection.
var errUnreachable = errors.New("unreachable: every endpoint refused the connection")

// errUntrusted ends an operation on a node whose TLS certificate does not
// verify.
var errUntrusted = errors.New("TLS: the node's certificate is not trusted")

// refusals counts the endpoints that refused a connection since the last
// attempt that got further; when all have, it cancels the operation.
type refusals struct {
	next   http.RoundTripper
	hosts  int // distinct endpoints
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	refused map[string]bool
}

func (r *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad *tls.CertificateVerificationError
	if err != nil && errors.As(err, &bad) {
		// Retrying cannot help: the node's certificate is not trusted.
		r.cancel(fmt.Errorf("%w: %v (give the cluster's CA with --ca)", errUntrusted, bad.Err))
		return resp, err
	}
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		r.refused[req.URL.Host] = true
		if len(r.refused) >= r.hosts {
			r.cancel(errUnreachable)
		}
	} else {
		clear(r.refused)
	}
	return resp, err
}

// normalizedAll is normalizeEndpoint of each of eps.
func normalizedAll(eps []string) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = normalizeEndpoint(e)
	}
	return out
}

func normalizeEndpoint(e string) string {
	e = strings.TrimSpace(e)
	if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		e = "http://" + e
	}
	return e
}

// kvErr is the message of a failed operation, without the client's own
// "cairn:" prefixes (main adds one).
func (o *kvOpts) kvErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errUnreachable) {
		return fmt.Errorf("%w (connection refused at %s)", errUnreachable, o.endpoints)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errUntrusted) {
		return cause
	}
	if errors.Is(err, client.ErrNotFound) {
		return errors.New("not found")
	}
	return errors.New(strings.ReplaceAll(err.Error(), "cairn: ", ""))
}

// forTerminal adds a newline to a value printed on a terminal that lacks
// one, so the shell prompt does not follow it on the same line; anywhere
// else the value's bytes go out as they are.
func forTerminal(w io.Writer, value []byte) []byte {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || bytes.HasSuffix(value, []byte("\n")) {
		return value
	}
	return append(value[:len(value):len(value)], '\n')
}
