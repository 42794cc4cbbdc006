package http2

// Answers waiting for the client's flow-control windows. The writer sends
// an answer as the client opens its windows; a client that stops opening
// them (a window of 0 announced, no WINDOW_UPDATE, or one that stops
// reading) would otherwise hold the answer, its handler and the
// connection for ever: the writer waits for window, not on the socket, so
// no write deadline passes, and the reader has no deadline while answers
// are owed. So each wait is bounded by WriteTimeout, counted afresh at
// each window update: a stream whose own window stays closed that long
// is reset (RST_STREAM CANCEL, its handler's writes fail), and a
// connection whose window stays closed that long ends (GOAWAY
// FLOW_CONTROL_ERROR). The clocks run only while an answer waits, and
// the writer's timer only then: a client that reads is not slowed.

import (
	"errors"
	"time"

	"golang.org/x/net/http2"
)

// errWindowClosed: the answer waited too long for the client's window.
var errWindowClosed = errors.New("http2: the client's flow-control window stayed closed")

// stall is what the writer's round found of the answers waiting for
// window.
type stall struct {
	// next: when the earliest clock running passes (zero: none runs).
	next time.Time
	// connWaits: an answer waits for the connection's window.
	connWaits bool
	// kill: the connection's window stayed closed past the bound.
	kill bool
	// resets: streams reset this round for their closed window.
	resets int
}

func (sl *stall) note(t time.Time) {
	if sl.next.IsZero() || t.Before(sl.next) {
		sl.next = t
	}
}

// waitWindow runs the clocks of a part that can send nothing for want of
// window (c.mu held) and reports whether its stream's window stayed
// closed past the bound.
func (c *conn) waitWindow(st *stream, now time.Time, sl *stall) bool {
	bound := c.s.writeTimeout()
	if st.sendWin <= 0 {
		if st.stallAt.IsZero() {
			st.stallAt = now.Add(bound)
		} else if !now.Before(st.stallAt) {
			return true
		}
		sl.note(st.stallAt)
	} else {
		st.stallAt = time.Time{}
	}
	if c.mu.sendConn <= 0 {
		sl.connWaits = true
		if c.mu.connStallAt.IsZero() {
			c.mu.connStallAt = now.Add(bound)
		} else if !now.Before(c.mu.connStallAt) {
			sl.kill = true
		}
		sl.note(c.mu.connStallAt)
	}
	return false
}

// resetStalled turns a part whose stream's window stayed closed into a
// reset of its stream (c.mu held): the handler's write fails, and what
// it writes next is dropped.
func (c *conn) resetStalled(p *part, sl *stall) {
	st := p.st
	st.reset = true
	if st.cancel != nil {
		st.cancel()
	}
	p.rst, p.err, p.data = http2.ErrCodeCancel, errWindowClosed, nil
	sl.resets++
}

// waitTimer waits for the writer's next wake, or until next (if not
// zero), when a clock of an answer waiting for window passes.
func (c *conn) waitTimer(next time.Time) {
	if next.IsZero() {
		c.wait(nil)
		return
	}
	d := time.Until(next)
	if c.stallTimer == nil {
		c.stallTimer = time.NewTimer(d)
	} else {
		c.stallTimer.Reset(d)
	}
	c.wait(c.stallTimer.C)
	c.stallTimer.Stop()
}
