package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestContextsShareWindowAndKeepTheirTimeout(t *testing.T) {
	w := New(context.Background(), time.Second, 10*time.Millisecond)
	t0 := time.Now()
	a := w.Context(t0)
	b := w.Context(t0.Add(5 * time.Millisecond))
	if a != b {
		t.Fatal("two operations in one window got different contexts")
	}
	c := w.Context(t0.Add(10 * time.Millisecond))
	if c == a {
		t.Fatal("an operation after the window got its context")
	}
	for _, tc := range []struct {
		ctx context.Context
		at  time.Time
	}{{a, t0}, {b, t0.Add(5 * time.Millisecond)}, {c, t0.Add(10 * time.Millisecond)}} {
		dl, ok := tc.ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if left := dl.Sub(tc.at); left < time.Second || left > time.Second+10*time.Millisecond {
			t.Fatalf("deadline %v after the operation began, want 1s to 1.01s", left)
		}
	}
	// A clock that went back does not reuse a window from its future.
	if d := w.Context(t0.Add(-time.Second)); d == c {
		t.Fatal("an earlier time got a later window")
	}
}

func TestContextEndsAtDeadlineOrWithParent(t *testing.T) {
	w := New(context.Background(), 20*time.Millisecond, time.Millisecond)
	ctx := w.Context(time.Now())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context did not end after its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v", ctx.Err())
	}

	parent, cancel := context.WithCancel(context.Background())
	w = New(parent, time.Hour, 0)
	ctx = w.Context(time.Now())
	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context did not end with its parent")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("err %v", ctx.Err())
	}
}

func TestWidthDefaultsToAFiftiethOfTimeout(t *testing.T) {
	if w := New(context.Background(), time.Second, 0); w.width != 20*time.Millisecond {
		t.Fatalf("width %v", w.width)
	}
	if w := New(context.Background(), time.Minute, time.Minute); w.width != 100*time.Millisecond {
		t.Fatalf("width %v", w.width)
	}
}
