package main

import (
	"net/http"
	"os"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/spf13/pflag"
)

// connFlags are how `cairn admin` reaches a node of a cluster started
// with TLS (--ca, --cert, --key) or --auth (--token, default
// $CAIRN_TOKEN).
type connFlags struct {
	token, ca, cert, key string
}

// add registers the flags on fs; tokenRole names the role the commands
// need.
func (c *connFlags) add(fs *pflag.FlagSet, tokenRole string) {
	fs.StringVar(&c.token, "token", "", "bearer token for nodes started with --auth, of role "+tokenRole+" (default: $CAIRN_TOKEN)")
	fs.StringVar(&c.ca, "ca", "", "https:// endpoint: the CA that signed the nodes' certificates")
	fs.StringVar(&c.cert, "cert", "", "client certificate for nodes started with --tls-client-auth")
	fs.StringVar(&c.key, "key", "", "private key of --cert")
}

// bearer is --token, or $CAIRN_TOKEN when it is not given.
func (c *connFlags) bearer() string {
	if c.token != "" {
		return c.token
	}
	return os.Getenv("CAIRN_TOKEN")
}

// httpClient returns a client that speaks TLS as the flags say and sends
// the token, if any, on every request; timeout bounds each request.
func (c *connFlags) httpClient(timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.ca != "" || c.cert != "" || c.key != "" {
		cfg, err := client.LoadTLS(c.ca, c.cert, c.key)
		if err != nil {
			return nil, usageError{err}
		}
		tr.TLSClientConfig = cfg
	}
	var rt http.RoundTripper = tr
	if tok := c.bearer(); tok != "" {
		rt = client.WithToken(tr, tok)
	}
	return &http.Client{Transport: rt, Timeout: timeout}, nil
}
