package faultclock

import (
	"testing"
	"time"
)

func TestNilClockHasNoOffset(t *testing.T) {
	var c *Clock
	if c.Offset() != 0 {
		t.Fatalf("nil offset %v", c.Offset())
	}
	now := time.Now()
	if got := c.ToWall(now); !got.Equal(now) {
		t.Fatalf("nil ToWall moved the time: %v vs %v", got, now)
	}
	if c.Monotonic() < 0 {
		t.Fatal("nil monotonic reading below zero")
	}
}

func TestSkewShiftsBothClocksAndHeals(t *testing.T) {
	c := New()
	before := c.Monotonic()
	c.Skew(2 * time.Minute)
	if got := c.Monotonic() - before; got < 2*time.Minute {
		t.Fatalf("monotonic moved %v after a 2m skew", got)
	}
	if d := c.Now().Sub(time.Now()); d < 119*time.Second {
		t.Fatalf("wall clock %v ahead after a 2m skew", d)
	}
	c.Skew(2 * time.Minute) // setting the same skew again is no step
	if c.Offset() != 2*time.Minute {
		t.Fatalf("offset %v", c.Offset())
	}
	c.Skew(0)
	if c.Offset() != 0 || c.Now().Sub(time.Now()) > time.Minute {
		t.Fatalf("healed skew leaves offset %v", c.Offset())
	}
}

func TestJumpsAccumulate(t *testing.T) {
	c := New()
	c.Jump(time.Minute)
	c.Jump(-3 * time.Minute)
	if c.Offset() != -2*time.Minute {
		t.Fatalf("offset %v after +1m and -3m", c.Offset())
	}
	real := time.Unix(1000, 0)
	if w := c.ToWall(real); !w.Equal(real.Add(-2 * time.Minute)) {
		t.Fatalf("ToWall %v", w)
	}
	if back := c.FromWall(c.ToWall(real)); !back.Equal(real) {
		t.Fatalf("FromWall(ToWall(t)) = %v, want %v", back, real)
	}
}
