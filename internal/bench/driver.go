package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotFound is returned by Get for an absent key (not counted as an
// error by the runner).
var ErrNotFound = errors.New("bench: not found")

// Driver runs operations against one target. conn selects one of the
// driver's connections; all methods are safe for concurrent use.
type Driver interface {
	Put(ctx context.Context, conn int, key, val []byte) error
	Get(ctx context.Context, conn int, key []byte) error
	EntityPut(ctx context.Context, conn int, id, val []byte) error
	EntityGet(ctx context.Context, conn int, id []byte) error
	Close() error
}

// DriverConfig configures a driver.
type DriverConfig struct {
	Target       string // http://h:p[,http://h:p…] or etcd://h:p[,h:p…]
	Conns        int
	Serializable bool
	Replicas     string // v0 replicas=ACK/FROM for entity ops
	// HTTP2 makes the Cairn driver speak HTTP/2 without TLS (h2c, prior
	// knowledge), so each connection carries many requests at once, as
	// etcd's gRPC connections do. Off: HTTP/1.1, one request at a time per
	// connection (what wrk and curl do).
	HTTP2   bool
	Timeout time.Duration
}

// NewDriver picks the driver from the target's scheme.
func NewDriver(c DriverConfig) (Driver, error) {
	if c.Conns <= 0 {
		c.Conns = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	switch {
	case strings.HasPrefix(c.Target, "http://"):
		return newHTTPDriver(c)
	case strings.HasPrefix(c.Target, "etcd://"):
		return newEtcdDriver(c)
	}
	return nil, fmt.Errorf("bench: --target must start with http:// (Cairn) or etcd://, got %q", c.Target)
}

// TargetKind is "cairn" or "etcd".
func TargetKind(target string) string {
	if strings.HasPrefix(target, "etcd://") {
		return "etcd"
	}
	return "cairn"
}

// httpDriver talks to Cairn nodes; connection i is pinned to node
// i mod len(nodes) and is one keep-alive TCP connection (HTTP/1.1, or
// HTTP/2 carrying many requests at once with DriverConfig.HTTP2).
type httpDriver struct {
	c       DriverConfig
	bases   []string
	clients []*http.Client
}

func newHTTPDriver(c DriverConfig) (*httpDriver, error) {
	d := &httpDriver{c: c}
	for _, b := range strings.Split(c.Target, ",") {
		b = strings.TrimRight(strings.TrimSpace(b), "/")
		if !strings.HasPrefix(b, "http://") {
			b = "http://" + b
		}
		if _, err := url.Parse(b); err != nil {
			return nil, fmt.Errorf("bench: bad target %q: %w", b, err)
		}
		d.bases = append(d.bases, b)
	}
	for i := 0; i < c.Conns; i++ {
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxConnsPerHost:     1,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     90 * time.Second,
		}
		if c.HTTP2 {
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
			tr.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
		}
		d.clients = append(d.clients, &http.Client{Transport: tr, Timeout: c.Timeout})
	}
	return d, nil
}

func (d *httpDriver) do(ctx context.Context, conn int, method, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := d.clients[conn%len(d.clients)].Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return ErrNotFound
	}
	return &StatusError{Code: resp.StatusCode}
}

// StatusError is an HTTP error answer.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("http %d", e.Code) }

func (d *httpDriver) base(conn int) string { return d.bases[conn%len(d.bases)] }

func (d *httpDriver) Put(ctx context.Context, conn int, key, val []byte) error {
	return d.do(ctx, conn, http.MethodPut, d.base(conn)+"/v1/kv/"+url.PathEscape(string(key)), val)
}

func (d *httpDriver) Get(ctx context.Context, conn int, key []byte) error {
	u := d.base(conn) + "/v1/kv/" + url.PathEscape(string(key))
	if d.c.Serializable {
		u += "?consistency=serializable"
	}
	return d.do(ctx, conn, http.MethodGet, u, nil)
}

func (d *httpDriver) entityURL(conn int, id []byte) string {
	u := d.base(conn) + "/v0/entity?id=" + url.QueryEscape(string(id))
	if d.c.Replicas != "" {
		u += "&replicas=" + d.c.Replicas
	}
	return u
}

func (d *httpDriver) EntityPut(ctx context.Context, conn int, id, val []byte) error {
	return d.do(ctx, conn, http.MethodPut, d.entityURL(conn, id), val)
}

func (d *httpDriver) EntityGet(ctx context.Context, conn int, id []byte) error {
	return d.do(ctx, conn, http.MethodGet, d.entityURL(conn, id), nil)
}

func (d *httpDriver) Close() error {
	for _, c := range d.clients {
		c.CloseIdleConnections()
	}
	return nil
}

// etcdDriver drives etcd through the official client; connection i is one
// clientv3.Client (one gRPC connection) over all endpoints.
type etcdDriver struct {
	c       DriverConfig
	clients []*clientv3.Client
}

func newEtcdDriver(c DriverConfig) (*etcdDriver, error) {
	var eps []string
	for _, e := range strings.Split(strings.TrimPrefix(c.Target, "etcd://"), ",") {
		eps = append(eps, strings.TrimPrefix(strings.TrimSpace(e), "etcd://"))
	}
	d := &etcdDriver{c: c}
	for i := 0; i < c.Conns; i++ {
		// Spread connections over the members as etcd's benchmark does.
		rot := append(append([]string(nil), eps[i%len(eps):]...), eps[:i%len(eps)]...)
		cl, err := clientv3.New(clientv3.Config{Endpoints: rot[:1], DialTimeout: 5 * time.Second})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("bench: etcd client: %w", err)
		}
		d.clients = append(d.clients, cl)
	}
	return d, nil
}

func (d *etcdDriver) cl(conn int) *clientv3.Client { return d.clients[conn%len(d.clients)] }

func (d *etcdDriver) Put(ctx context.Context, conn int, key, val []byte) error {
	_, err := d.cl(conn).Put(ctx, string(key), string(val))
	return err
}

func (d *etcdDriver) Get(ctx context.Context, conn int, key []byte) error {
	var opts []clientv3.OpOption
	if d.c.Serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := d.cl(conn).Get(ctx, string(key), opts...)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return ErrNotFound
	}
	return nil
}

var errEntityUnsupported = errors.New("bench: the entity workload needs a Cairn (http://) target")

func (d *etcdDriver) EntityPut(context.Context, int, []byte, []byte) error {
	return errEntityUnsupported
}
func (d *etcdDriver) EntityGet(context.Context, int, []byte) error { return errEntityUnsupported }

func (d *etcdDriver) Close() error {
	for _, c := range d.clients {
		c.Close()
	}
	return nil
}
