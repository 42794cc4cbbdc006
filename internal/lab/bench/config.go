package bench

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// ErrInvalidConfig wraps every error of RunConfig.Validate and
// DriverConfig.Validate.
var ErrInvalidConfig = errors.New("bench: invalid config")

// RunConfig is the load model of one run. Run fills its defaults
// (EnsureDefaults) and validates it once.
type RunConfig struct {
	// Clients issuing operations (closed loop: each waits for its answer),
	// a count. Default 1.
	Clients int
	// Conns is the number of connections the clients share (client i uses
	// connection i mod Conns). Default 1.
	Conns int
	// Total measured operations; default 0: run for Duration.
	Total uint64
	// Duration of the measured phase when Total is 0. Default 10 s (when
	// Total is 0).
	Duration time.Duration
	// Warmup runs the load this long before measuring. Default 0: none.
	Warmup time.Duration
	// Rate, in operations per second, > 0 selects the open loop:
	// operations are due every 1/Rate seconds and latency counts from the
	// due time. Default 0: closed loop.
	Rate float64
	// OpTimeout bounds one operation. Default 10 s.
	OpTimeout time.Duration
	// RetryWait is the wait after a refusal (503) before the operation is
	// tried again. Default 0: what the answer's Retry-After asks, up to a
	// tenth more (retry.go); else a backoff drawn uniformly from
	// RetryWait/2 to 3·RetryWait/2, whatever Retry-After says.
	RetryWait time.Duration
	// Seed of client i's random source (Seed + i·7919 + 1). Default 0.
	Seed int64
	// Progress receives live progress; default (nil): none.
	Progress io.Writer
	// TTY selects a single rewritten progress line instead of plain lines
	// every 5 s. Default false.
	TTY bool
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c RunConfig) EnsureDefaults() RunConfig {
	if c.Clients == 0 {
		c.Clients = 1
	}
	if c.Conns == 0 {
		c.Conns = 1
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.Total == 0 && c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c RunConfig) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("%w: Clients %d: want at least 1", ErrInvalidConfig, c.Clients)
	case c.Conns < 1:
		return fmt.Errorf("%w: Conns %d: want at least 1", ErrInvalidConfig, c.Conns)
	case c.Duration < 0:
		return fmt.Errorf("%w: Duration %v: want 0 or more", ErrInvalidConfig, c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("%w: Warmup %v: want 0 or more", ErrInvalidConfig, c.Warmup)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: Rate %v: want 0 (closed loop) or a finite rate above 0", ErrInvalidConfig, c.Rate)
	case c.OpTimeout <= 0:
		return fmt.Errorf("%w: OpTimeout %v: want more than 0", ErrInvalidConfig, c.OpTimeout)
	case c.RetryWait < 0:
		return fmt.Errorf("%w: RetryWait %v: want 0 (Retry-After) or more", ErrInvalidConfig, c.RetryWait)
	}
	return nil
}

// DriverConfig configures a driver. NewDriver fills its defaults
// (EnsureDefaults) and validates it once.
type DriverConfig struct {
	// Target is http://h:p[,http://h:p…] or https://… (Cairn) or
	// etcd://h:p[,h:p…]. Required.
	Target string
	// TLS configures https:// targets (the nodes' CA, a client
	// certificate); default nil: the system's roots.
	TLS *tls.Config
	// Token is a bearer token sent with every Cairn request (nodes
	// started with --auth); default empty: none.
	Token string
	// Conns is the number of connections the driver keeps (with
	// RouteLeader at least one per node). Default 1.
	Conns int
	// Serializable reads from one replica, maybe stale. Default false:
	// linearizable reads.
	Serializable bool
	// IndexLinearizable makes 2i queries (the nhs workload's) linearizable:
	// every shard's leader confirms a read index first. Default false:
	// serializable, one replica's applied state per shard, as Riak's 2i
	// coverage queries (docs/benchmarks/volume/README.md).
	IndexLinearizable bool
	// Replicas is v0's replicas=ACK/FROM for entity ops; default empty:
	// none sent.
	Replicas string
	// HTTP2 makes the Cairn driver speak HTTP/2 without TLS (h2c, prior
	// knowledge), so each connection carries many requests at once, as
	// etcd's gRPC connections do. Default false: HTTP/1.1 with up to
	// Pipeline requests in flight per connection.
	HTTP2 bool
	// Pipeline bounds the HTTP/1.1 requests in flight on one connection,
	// a count. Default 1: one at a time (what wrk and curl do).
	Pipeline int
	// Route: RouteLeader (default) sends each request to the node that
	// leads its key's shard; RouteFixed pins connection i to node
	// i mod n. Cairn targets only.
	Route string
	// Timeout bounds a Cairn request that has no deadline of its own (and
	// any HTTP/2 request) and the router's reads of the shard map.
	// Default 10 s.
	Timeout time.Duration
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c DriverConfig) EnsureDefaults() DriverConfig {
	if c.Conns == 0 {
		c.Conns = 1
	}
	if c.Pipeline == 0 {
		c.Pipeline = 1
	}
	if c.Route == "" {
		c.Route = RouteLeader
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that
// is out of range.
func (c DriverConfig) Validate() error {
	switch {
	case !strings.HasPrefix(c.Target, "http://") && !strings.HasPrefix(c.Target, "https://") && !strings.HasPrefix(c.Target, "etcd://"):
		return fmt.Errorf("%w: Target (--target) must start with http:// or https:// (Cairn) or etcd://, got %q", ErrInvalidConfig, c.Target)
	case c.Conns < 1:
		return fmt.Errorf("%w: Conns %d: want at least 1", ErrInvalidConfig, c.Conns)
	case strings.ContainsAny(c.Token, "\r\n "):
		return fmt.Errorf("%w: Token holds a space or line break", ErrInvalidConfig)
	case c.Pipeline < 1:
		return fmt.Errorf("%w: Pipeline %d: want at least 1", ErrInvalidConfig, c.Pipeline)
	case c.Route != RouteLeader && c.Route != RouteFixed:
		return fmt.Errorf("%w: Route (--route) must be %s or %s, got %q", ErrInvalidConfig, RouteLeader, RouteFixed, c.Route)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v: want more than 0", ErrInvalidConfig, c.Timeout)
	}
	return nil
}
