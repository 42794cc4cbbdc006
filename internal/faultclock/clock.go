package faultclock

import (
	"sync/atomic"
	"time"
)

// Clock reads the real clocks shifted by an injected offset. The zero
// value and a nil *Clock read them unshifted.
type Clock struct {
	start  time.Time
	offset atomic.Int64 // nanoseconds
}

// New returns a clock whose monotonic readings count from now.
func New() *Clock { return &Clock{start: time.Now()} }

// Offset is the injected shift of every reading (0 when nil).
func (c *Clock) Offset() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.offset.Load())
}

// Skew sets the offset to d (0 heals): from now on every reading is d
// away from the real clocks. Moving from one offset to another is a step
// of the difference, forward or back.
func (c *Clock) Skew(d time.Duration) { c.offset.Store(int64(d)) }

// Jump moves the offset by d, once: the readings step by d and keep
// running from there.
func (c *Clock) Jump(d time.Duration) { c.offset.Add(int64(d)) }

// Now is the node's wall clock: time.Now shifted by the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(c.Offset()) }

// Monotonic is the time since the clock was made, on Go's monotonic
// clock, shifted by the offset. A negative offset can make it go below
// zero: it is a reading to subtract from another, not a time.
func (c *Clock) Monotonic() time.Duration {
	if c == nil {
		return time.Since(processStart)
	}
	return time.Since(c.start) + c.Offset()
}

// ToWall converts a real time into the node's wall clock (what the node
// would write down for it); FromWall converts back a time read off this
// node's wall clock.
func (c *Clock) ToWall(t time.Time) time.Time { return t.Add(c.Offset()) }

// FromWall: see ToWall.
func (c *Clock) FromWall(t time.Time) time.Time { return t.Add(-c.Offset()) }

var processStart = time.Now()
