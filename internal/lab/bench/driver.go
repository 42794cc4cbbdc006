package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/http1"
	"github.com/cairn-db/cairn/internal/lab/result"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotFound is returned by Get for an absent key (not counted as an
// error by the runner).
var ErrNotFound = result.ErrNotFound

// Driver runs operations against one target. conn selects one of the
// driver's connections; all methods are safe for concurrent use.
type Driver interface {
	Put(ctx context.Context, conn int, key, val []byte) error
	Get(ctx context.Context, conn int, key []byte) error
	// Scan reads up to limit records in key order from start.
	Scan(ctx context.Context, conn int, start []byte, limit int) error
	EntityPut(ctx context.Context, conn int, id, val []byte) error
	EntityGet(ctx context.Context, conn int, id []byte) error
	Close() error
}

// NewDriver picks the driver from the target's scheme; it fills c's
// defaults and validates it first.
func NewDriver(c DriverConfig) (Driver, error) {
	c = c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(c.Target, "etcd://") {
		return newEtcdDriver(c)
	}
	return newHTTPDriver(c)
}

// TargetKind is "cairn" or "etcd".
func TargetKind(target string) string {
	if strings.HasPrefix(target, "etcd://") {
		return "etcd"
	}
	return "cairn"
}

// httpDriver talks to Cairn nodes over Conns keep-alive TCP connections,
// connection i to node i mod n (with RouteLeader at least one per node).
// With RouteFixed, a request on connection i goes there; with RouteLeader
// it goes to one of the connections of the node leading its key's shard.
// A connection speaks HTTP/1.1 with up to Pipeline requests in flight
// (internal/http1), or HTTP/2 carrying many at once (DriverConfig.HTTP2).
type httpDriver struct {
	c      DriverConfig
	bases  []string // http://host:port (or https://) per node
	links  []*link
	byNode [][]*link // the links of each node
	rt     *router   // nil with RouteFixed
}

// link is one lazily dialed connection to one node.
type link struct {
	idx   int // in httpDriver.links
	node  int
	addr  string
	tls   *tls.Config // nil: plain TCP
	depth int
	mu    sync.Mutex
	h1    *http1.Conn
	h2    http.RoundTripper
}

func newHTTPDriver(c DriverConfig) (*httpDriver, error) {
	d := &httpDriver{c: c}
	tlsCfg := c.TLS
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	for _, b := range strings.Split(c.Target, ",") {
		b = strings.TrimRight(strings.TrimSpace(b), "/")
		if !strings.HasPrefix(b, "http://") && !strings.HasPrefix(b, "https://") {
			b = "http://" + b
		}
		u, err := url.Parse(b)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("bench: bad target %q: want http://host:port or https://host:port", b)
		}
		d.bases = append(d.bases, u.Scheme+"://"+u.Host)
	}
	n := c.Conns
	if c.Route == RouteLeader {
		d.rt = newRouter(d.bases, c.Timeout, tlsCfg)
		n = max(n, len(d.bases))
	}
	d.byNode = make([][]*link, len(d.bases))
	for i := 0; i < n; i++ {
		j := i % len(d.bases)
		scheme, host, _ := strings.Cut(d.bases[j], "://")
		l := &link{idx: i, node: j, addr: host, depth: c.Pipeline}
		if scheme == "https" {
			l.tls = tlsCfg
		}
		if c.HTTP2 {
			l.h2 = newH2Transport(l.tls)
		}
		d.links = append(d.links, l)
		d.byNode[j] = append(d.byNode[j], l)
	}
	return d, nil
}

// link picks the connection of a request for key made on connection conn.
func (d *httpDriver) link(conn int, key []byte) *link {
	if d.rt != nil {
		if n, ok := d.rt.leaderOf(key); ok {
			ls := d.byNode[n]
			return ls[conn/len(d.bases)%len(ls)]
		}
	}
	return d.links[conn%len(d.links)]
}

func (d *httpDriver) do(ctx context.Context, conn int, key []byte, method, pathQuery string, body []byte) error {
	return d.doH(ctx, conn, key, method, pathQuery, body, nil)
}

// doH is do with header fields (name, value pairs).
func (d *httpDriver) doH(ctx context.Context, conn int, key []byte, method, pathQuery string, body []byte, hdr [][2]string) error {
	l := d.link(conn, key)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.c.Timeout)
		defer cancel()
	}
	var status int
	var retryAfter string
	if l.h2 != nil {
		req, err := http.NewRequestWithContext(ctx, method, d.bases[l.node]+pathQuery, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if d.c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+d.c.Token)
		}
		for _, h := range hdr {
			req.Header.Set(h[0], h[1])
		}
		resp, err := l.h2.RoundTrip(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status, retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	} else {
		c, err := l.conn(ctx)
		if err != nil {
			return err
		}
		r := &http1.Request{Method: method, Path: pathQuery, Body: body, Header: hdr}
		if d.c.Token != "" {
			r.Header = append([][2]string{{"Authorization", "Bearer " + d.c.Token}}, hdr...)
		}
		resp, err := c.Do(ctx, r)
		if err != nil {
			return err
		}
		status = resp.Status
		if status == http.StatusServiceUnavailable {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	err := statusError(status)
	if se, ok := err.(*StatusError); ok && status == http.StatusServiceUnavailable {
		se.RetryAfter = parseRetryAfter(retryAfter)
	}
	return err
}

// parseRetryAfter is a Retry-After field's wait: delay-seconds (Cairn's
// nodes send 1), or 0 when absent or not a number (an HTTP-date is not
// honoured: Cairn never sends one).
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// statusError is the error of an answer's status: nil for success,
// ErrNotFound for 404, else a StatusError.
func statusError(status int) error {
	switch {
	case status < 300:
		return nil
	case status == http.StatusNotFound:
		return ErrNotFound
	}
	return &StatusError{Code: status}
}

// conn returns the link's HTTP/1.1 connection, dialing a new one when
// there is none or the last one failed.
func (l *link) conn(ctx context.Context) (*http1.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h1 != nil && !l.h1.Failed() {
		return l.h1, nil
	}
	var c *http1.Conn
	var err error
	if l.tls != nil {
		c, err = http1.DialTLS(ctx, l.addr, l.depth, l.tls)
	} else {
		c, err = http1.Dial(ctx, l.addr, l.depth)
	}
	if err != nil {
		return nil, err
	}
	l.h1 = c
	return c, nil
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h1 != nil {
		l.h1.Close()
	}
	if c, ok := l.h2.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// StatusError is an HTTP error answer. RetryAfter is a 503's
// Retry-After (0: none).
type StatusError struct {
	Code       int
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("http %d", e.Code) }

func (d *httpDriver) Put(ctx context.Context, conn int, key, val []byte) error {
	return d.do(ctx, conn, key, http.MethodPut, "/v1/kv/"+url.PathEscape(string(key)), val)
}

func (d *httpDriver) Get(ctx context.Context, conn int, key []byte) error {
	u := "/v1/kv/" + url.PathEscape(string(key))
	if d.c.Serializable {
		u += "?consistency=serializable"
	}
	return d.do(ctx, conn, key, http.MethodGet, u, nil)
}

// PutIndexed writes key=val with its index terms as X-Cairn-Index-*
// headers.
func (d *httpDriver) PutIndexed(ctx context.Context, conn int, key, val []byte, index [][2]string) error {
	return d.doH(ctx, conn, key, http.MethodPut, "/v1/kv/"+url.PathEscape(string(key)), val, indexHeaders(index))
}

// Head reads key's metadata (HEAD /v1/kv/{key}).
func (d *httpDriver) Head(ctx context.Context, conn int, key []byte) error {
	u := "/v1/kv/" + url.PathEscape(string(key))
	if d.c.Serializable {
		u += "?consistency=serializable"
	}
	return d.do(ctx, conn, key, http.MethodHead, u, nil)
}

// IndexRange reads the first page of GET /v1/index/{index}?start&end.
func (d *httpDriver) IndexRange(ctx context.Context, conn int, index, start, end string, limit int) error {
	u := "/v1/index/" + url.PathEscape(index) + "?start=" + url.QueryEscape(start) + "&end=" + url.QueryEscape(end) +
		"&max_results=" + strconv.Itoa(limit)
	if !d.c.IndexLinearizable {
		u += "&consistency=serializable"
	}
	return d.do(ctx, conn, []byte(index), http.MethodGet, u, nil)
}

// scanURL is the listing of up to limit records from start.
func (d *httpDriver) scanURL(start []byte, limit int) string {
	u := "/v1/kv?start=" + url.QueryEscape(string(start)) + "&limit=" + strconv.Itoa(limit)
	if d.c.Serializable {
		u += "&consistency=serializable"
	}
	return u
}

func (d *httpDriver) Scan(ctx context.Context, conn int, start []byte, limit int) error {
	return d.do(ctx, conn, start, http.MethodGet, d.scanURL(start, limit), nil)
}

func (d *httpDriver) entityURL(id []byte) string {
	u := "/v0/entity?id=" + url.QueryEscape(string(id))
	if d.c.Replicas != "" {
		u += "&replicas=" + d.c.Replicas
	}
	return u
}

func (d *httpDriver) EntityPut(ctx context.Context, conn int, id, val []byte) error {
	return d.do(ctx, conn, id, http.MethodPut, d.entityURL(id), val)
}

// EntityPutIndexed is EntityPut with index terms as X-Cairn-Index-*
// headers.
func (d *httpDriver) EntityPutIndexed(ctx context.Context, conn int, id, val []byte, index [][2]string) error {
	return d.doH(ctx, conn, id, http.MethodPut, d.entityURL(id), val, indexHeaders(index))
}

func (d *httpDriver) EntityGet(ctx context.Context, conn int, id []byte) error {
	return d.do(ctx, conn, id, http.MethodGet, d.entityURL(id), nil)
}

func (d *httpDriver) Close() error {
	if d.rt != nil {
		d.rt.stop()
	}
	for _, l := range d.links {
		l.close()
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

func (d *etcdDriver) Scan(ctx context.Context, conn int, start []byte, limit int) error {
	opts := []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(int64(limit))}
	if d.c.Serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	_, err := d.cl(conn).Get(ctx, string(start), opts...)
	return err
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
