package etcdapi

// The token of a stream (Watch, LeaseKeepAlive) is checked when the
// stream opens (authStream), at each request on it (checkedStream), and
// every Config.StreamAuthInterval while it is open (streamCheck): a
// watch stream on which the client sends nothing more would otherwise
// read on for ever with a token revoked or expired since. A check that
// refuses the token ends the stream with the refusal, etcd's error
// (invalid auth token, so clientv3 logs in again as with etcd): the
// stream's context is canceled, the handler returns, and authStream
// answers the refusal. A check that cannot be made at the moment (the
// token records' shard without a leader, too many checks at once) lets
// the stream go on: its token was good when it opened.
//
// The authenticator does not tell when a token expires, so an expired
// token is found by the next check, as a revoked one is (auth's cache of
// checked tokens never outlives a token's expiry).
//
// Threads: none waits per stream. Each stream has one timer, whose
// function (run by the Go runtime) makes one check and sets the timer
// again; stop, once the handler has returned, waits for a check under
// way and stops the timer.

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamCheck checks an open stream's token again every
// Config.StreamAuthInterval, and ends the stream once a check refuses
// it.
type streamCheck struct {
	s      *Server
	method string
	// ctx is the stream's context as its handler sees it; cut cancels it.
	ctx context.Context
	cut context.CancelCauseFunc
	// turn is held by the check under way, and by stop from then on: a
	// check that finds it held has nothing to do.
	turn chan struct{}
	mu   struct {
		sync.Mutex
		// t runs check. It is set under mu: its first check may come
		// before AfterFunc has returned.
		t       *time.Timer
		refused error // the refusal that ended the stream, if one did
	}
}

// checkStream starts checking the token of a stream of method (a gRPC
// full method name) whose context is parent; the caller calls stop once
// the stream's handler has returned.
func (s *Server) checkStream(parent context.Context, method string) *streamCheck {
	ctx, cut := context.WithCancelCause(parent)
	c := &streamCheck{s: s, method: method, ctx: ctx, cut: cut, turn: make(chan struct{}, 1)}
	c.mu.Lock()
	c.mu.t = time.AfterFunc(c.wait(), c.check)
	c.mu.Unlock()
	return c
}

// wait is the time to the next check: the interval less up to a quarter
// of it, drawn at random, so the streams a client opened together (after
// a reconnection) do not all check at the same moment.
func (c *streamCheck) wait() time.Duration {
	d := c.s.cfg.StreamAuthInterval
	return d - rand.N(d/4+1)
}

// check checks the token once; it ends the stream if the token is
// refused, and sets the timer for the next check otherwise.
func (c *streamCheck) check() {
	select {
	case c.turn <- struct{}{}:
	default:
		return // stopped
	}
	defer func() { <-c.turn }()
	if c.ctx.Err() != nil {
		return
	}
	ctx, cancel := c.s.withDeadline(c.ctx)
	err := c.s.authorize(ctx, c.method, nil)
	cancel()
	switch {
	case c.ctx.Err() != nil:
		// The stream ended meanwhile: whatever the check answered, it
		// does not end it.
	case err == nil || status.Code(err) == codes.Unavailable:
		c.mu.Lock()
		c.mu.t.Reset(c.wait())
		c.mu.Unlock()
	default:
		c.mu.Lock()
		c.mu.refused = err
		c.mu.Unlock()
		c.cut(err)
	}
}

// refusal is the refusal that ended the stream (nil if none has).
func (c *streamCheck) refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.refused
}

// stop ends the checks, once the stream's handler has returned: no check
// is made after it returns. It answers the refusal that ended the stream,
// if one did.
func (c *streamCheck) stop() error {
	c.cut(nil)
	c.turn <- struct{}{} // waits for a check under way; held for good
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.t.Stop()
	return c.mu.refused
}

// checkedStream is a stream whose token is checked again at each request
// on it, and whose context ends when a check of its token refuses it.
type checkedStream struct {
	grpc.ServerStream
	c *streamCheck
}

func (cs checkedStream) Context() context.Context { return cs.c.ctx }

func (cs checkedStream) RecvMsg(m any) error {
	if err := cs.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := cs.c.refusal(); err != nil {
		return err
	}
	err := cs.c.s.authorize(cs.c.ctx, cs.c.method, nil)
	if status.Code(err) == codes.Unavailable {
		// The token was good when the stream opened and cannot be
		// checked now (too many checks at once, the records' shard
		// slow): the stream goes on rather than end its watches.
		return nil
	}
	return err
}
