package http2

// Answers waiting for the client's flow-control windows. The writer sends
// an answer as the client opens its windows; a client that stops opening
// them (a window of 0 announced, no WINDOW_UPDATE, or one that stops
// reading) would otherwise hold the answer, its handler and the
// connection for ever: the writer waits for window, not on the socket, so
// no write deadline passes, and the reader has no deadline while answers
// are owed. So each wait is bounded by WriteTimeout:
//
//   - an answer that can send nothing, for want of its stream's window or
//     the connection's, starts its stream's clock, which counts the time
//     the answer waits for window (not the time its handler takes to
//     write it); the clock restarts only once minProgress bytes of the
//     answer went out (or the answer ended), so a client that opens a
//     byte of window now and then, just inside the bound, does not hold
//     the answer for ever: it is reset (RST_STREAM CANCEL, its handler's
//     writes fail) once it waited WriteTimeout in all unless minProgress
//     bytes went out meanwhile; an answer that waits for the
//     connection's window only (its stream's is open) counts the bytes
//     of every answer on the connection instead, since the others take
//     that window: a client reading many answers at once, steadily, has
//     them all whatever their turn;
//   - a connection whose window stays closed, no WINDOW_UPDATE for it,
//     for WriteTimeout ends (GOAWAY FLOW_CONTROL_ERROR).
//
// A client that reads slowly but steadily, minProgress bytes within each
// WriteTimeout, gets its whole answer however long it takes. The clocks
// run only while an answer waits, and the writer's timer only then: a
// client that reads is not slowed.

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

// minProgress is how many bytes of a waiting answer must go out within
// WriteTimeout to restart its clock.
const minProgress = 16 << 10

// waitWindow runs the clocks of a part that can send nothing for want of
// window (c.mu held) and reports whether its stream waited past the
// bound without minProgress bytes sent.
func (c *conn) waitWindow(st *stream, now time.Time, sl *stall) bool {
	bound := c.s.writeTimeout()
	if c.mu.sendConn <= 0 {
		sl.connWaits = true
		if c.mu.connStallAt.IsZero() {
			c.mu.connStallAt = now.Add(bound)
		} else if !now.Before(c.mu.connStallAt) {
			sl.kill = true // the connection ends: no stream need be reset
		}
		sl.note(c.mu.connStallAt)
	}
	// A clock starts afresh when none runs, and when the answer waits
	// for the connection's window only, which other answers take: it is
	// the connection's progress that tells whether the client reads.
	if !st.clock || st.sendWin > 0 && c.mu.sent-st.connMark >= minProgress {
		st.clock, st.waitFrom, st.waited = true, now, 0
		st.progress, st.connMark = 0, c.mu.sent
	}
	if st.waitFrom.IsZero() {
		st.waitFrom = now
	}
	at := st.waitFrom.Add(bound - st.waited)
	if !now.Before(at) && !sl.kill {
		return true
	}
	sl.note(at)
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

// sent counts n bytes of st's answer sent at now (c.mu held); ended:
// its last. The wait they end is added to the clock; enough of them
// stop it.
func (st *stream) sent(n int64, ended bool, now time.Time) {
	if !st.clock {
		return
	}
	if !st.waitFrom.IsZero() {
		st.waited += now.Sub(st.waitFrom)
		st.waitFrom = time.Time{}
	}
	st.progress += n
	if ended || st.progress >= minProgress {
		st.clock, st.waited, st.progress = false, 0, 0
	}
}
