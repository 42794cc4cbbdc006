// Package client is a Go client of Cairn's v1 HTTP API. It spreads requests
// over the nodes it is given, and retries through failover: every write
// carries a request id (Cairn-Request-Id) that stays the same across its
// retries, so a write retried after a leader change is applied at most once
// and a compare-and-set that succeeded is not re-run and reported as failed.
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Errors; *Error wraps them so errors.Is works.
var (
	ErrNotFound           = errors.New("cairn: not found")
	ErrPreconditionFailed = errors.New("cairn: precondition failed")
	ErrTimeout            = errors.New("cairn: timeout") // outcome unknown for writes
	ErrOverloaded         = errors.New("cairn: overloaded")
	ErrBadRequest         = errors.New("cairn: bad request")
	// ErrRequestIDReused: the request id named an earlier, different write
	// (409); nothing was written.
	ErrRequestIDReused = errors.New("cairn: request id reused by a different write")
)

// Error is an error answer of a node.
type Error struct {
	Status  int
	Code    string
	Message string
	kind    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("cairn: %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel the status maps to.
func (e *Error) Unwrap() error { return e.kind }

// Client talks to a Cairn cluster.
type Client struct {
	eps  []string
	opts Options
	// cur is the node in use: the client stays on it until an attempt
	// there fails, then moves to the next.
	cur atomic.Uint64
}

// New returns a client of the nodes at endpoints (base URLs); it fills
// opts's defaults and validates them first.
func New(endpoints []string, opts Options) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("cairn: no endpoints")
	}
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Client{opts: opts}
	for _, e := range endpoints {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			e = "http://" + e
		}
		c.eps = append(c.eps, e)
	}
	return c, nil
}

// Versioned is a value and its version (the ETag).
type Versioned struct {
	Value   []byte
	Version uint64
}

// Get reads key linearizably (serializable: from one replica, maybe stale).
func (c *Client) Get(ctx context.Context, key []byte, serializable bool) (Versioned, error) {
	q := ""
	if serializable {
		q = "?consistency=serializable"
	}
	var out Versioned
	err := c.do(ctx, http.MethodGet, key, q, nil, nil, func(resp *http.Response, body []byte) {
		out = Versioned{Value: body, Version: etag(resp)}
	})
	return out, err
}

// PutOptions condition a write.
type PutOptions struct {
	IfVersion uint64 // write only if the current version is this (If-Match)
	IfAbsent  bool   // write only if the key does not exist
}

// Put writes key=value and returns the new version.
func (c *Client) Put(ctx context.Context, key, value []byte, o PutOptions) (uint64, error) {
	h := http.Header{}
	if o.IfVersion != 0 {
		h.Set("If-Match", strconv.Quote(strconv.FormatUint(o.IfVersion, 10)))
	}
	if o.IfAbsent {
		h.Set("If-None-Match", "*")
	}
	var v uint64
	err := c.do(ctx, http.MethodPut, key, "", value, h, func(resp *http.Response, _ []byte) { v = etag(resp) })
	return v, err
}

// Delete removes key (ErrNotFound if absent).
func (c *Client) Delete(ctx context.Context, key []byte, ifVersion uint64) error {
	h := http.Header{}
	if ifVersion != 0 {
		h.Set("If-Match", strconv.Quote(strconv.FormatUint(ifVersion, 10)))
	}
	return c.do(ctx, http.MethodDelete, key, "", nil, h, nil)
}

func etag(resp *http.Response) uint64 {
	v, _ := strconv.ParseUint(strings.Trim(resp.Header.Get("ETag"), `"`), 10, 64)
	return v
}

// do runs one operation: on a connection error, a 503, a 504 timeout or
// (with more than one node) a 507 it retries on the next node with
// jittered backoff until the deadline (for a write, at most
// WriteRetryWindow after its first attempt).
func (c *Client) do(ctx context.Context, method string, key []byte, query string, body []byte, h http.Header, ok func(*http.Response, []byte)) error {
	timeout := c.opts.Timeout
	if method != http.MethodGet {
		timeout = min(timeout, c.opts.WriteRetryWindow)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if h == nil {
		h = http.Header{}
	}
	if method != http.MethodGet {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		h.Set("Cairn-Request-Id", hex.EncodeToString(id))
	}
	return c.retry(ctx, func(actx context.Context, ep string) error {
		return c.once(actx, ep, method, key, query, body, h, ok)
	})
}

// retry runs attempt on the node in use, each attempt bounded by
// AttemptTimeout; while the error is retryable it moves on to the next
// node with backoff, until ctx ends (then ErrTimeout, wrapping the last
// error).
func (c *Client) retry(ctx context.Context, attempt func(ctx context.Context, ep string) error) error {
	backoff := 10 * time.Millisecond
	for {
		idx := c.cur.Load()
		ep := c.eps[idx%uint64(len(c.eps))]
		actx, acancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
		err := attempt(actx, ep)
		acancel()
		if err == nil || !c.retryable(err) || c.opts.NoRetry {
			return err
		}
		c.cur.CompareAndSwap(idx, idx+1) // move on from the failing node
		select {
		case <-ctx.Done():
			if errors.Is(err, ErrTimeout) {
				return err
			}
			return fmt.Errorf("%w: %v", ErrTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

func (c *Client) retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		// 507: that node refuses new values (its disk is full); another
		// node may take the write.
		return e.Status == http.StatusServiceUnavailable || (e.Status == http.StatusGatewayTimeout && e.Code == "timeout") ||
			(e.Status == http.StatusInsufficientStorage && len(c.eps) > 1)
	}
	return !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPreconditionFailed)
}

func (c *Client) once(ctx context.Context, ep, method string, key []byte, query string, body []byte, h http.Header, ok func(*http.Response, []byte)) error {
	u := ep + "/v1/kv/" + keyPath(key) + query
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.opts.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	if resp.StatusCode < 300 {
		if ok != nil {
			ok(resp, data)
		}
		return nil
	}
	return errorOf(resp.StatusCode, data)
}

// keyPath is key (or an index term) as one segment of a path:
// percent-encoded, its slashes included, and "." and ".." wholly (a node
// refuses a dot segment rather than take it for a key).
func keyPath(key []byte) string {
	if k := string(key); k == "." || k == ".." {
		return strings.Repeat("%2E", len(k))
	}
	return url.PathEscape(string(key))
}
