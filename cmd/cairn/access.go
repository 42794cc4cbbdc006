package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/backup"
	"github.com/spf13/pflag"
)

// accessFlags are how `cairn admin`, `backup` and `restore` reach the
// nodes of a cluster started with TLS (--ca, --cert, --key) or --auth
// (--token, default $CAIRN_TOKEN).
type accessFlags struct {
	token, ca, cert, key string
}

// add registers the flags on fs; tokenRole names the token the commands
// need ("an admin token").
func (c *accessFlags) add(fs *pflag.FlagSet, tokenRole string) {
	fs.StringVar(&c.token, "token", "", "bearer token for nodes started with --auth: "+tokenRole+" (default: $CAIRN_TOKEN)")
	fs.StringVar(&c.ca, "ca", "", "https:// nodes: the CA that signed their certificates")
	fs.StringVar(&c.cert, "cert", "", "client certificate for nodes started with --tls-client-auth")
	fs.StringVar(&c.key, "key", "", "private key of --cert")
}

// bearer is --token, or $CAIRN_TOKEN when it is not given.
func (c *accessFlags) bearer() string {
	if c.token != "" {
		return c.token
	}
	return os.Getenv("CAIRN_TOKEN")
}

// httpClient returns a client of endpoint that speaks TLS as the flags
// say and sends the token, if any, on every request; timeout bounds each
// request. With --ca, --cert or --key the endpoint must be https://: a
// Go client given a TLS configuration and an http:// URL speaks plain
// HTTP, and would send the token in clear. It follows no redirect to
// another scheme or host (the token would go there too).
func (c *accessFlags) httpClient(endpoint string, timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg, err := c.tls(endpoint)
	if err != nil {
		return nil, err
	}
	tr.TLSClientConfig = cfg
	var rt http.RoundTripper = tr
	if tok := c.bearer(); tok != "" {
		rt = client.WithToken(tr, tok)
	}
	return &http.Client{Transport: rt, Timeout: timeout, CheckRedirect: sameOrigin}, nil
}

// sameOrigin refuses a redirect to another scheme or host than the
// request's first one.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("refused a redirect from %s://%s to %s://%s (the token would go there too)",
			first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// tls returns the TLS configuration the flags give (nil without them).
// With --ca, --cert or --key every endpoint must be https://: a Go
// client given a TLS configuration and an http:// URL speaks plain HTTP,
// and would send the token in clear.
func (c *accessFlags) tls(endpoints ...string) (*tls.Config, error) {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	for _, e := range endpoints {
		if !strings.HasPrefix(strings.TrimSpace(e), "https://") {
			return nil, usageError{fmt.Errorf("--ca, --cert and --key need https:// endpoints (not %q): over http:// the token would be sent in clear", e)}
		}
	}
	cfg, err := client.LoadTLS(c.ca, c.cert, c.key)
	if err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// access is the flags as backup.Access, for the nodes at endpoints.
func (c *accessFlags) access(endpoints ...string) (backup.Access, error) {
	cfg, err := c.tls(endpoints...)
	return backup.Access{Token: c.bearer(), TLS: cfg}, err
}
