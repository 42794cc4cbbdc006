package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Each send reserves its share of the time line: at 1000 bytes/s, sends
// of 100 bytes go 100 ms apart, whoever makes them; after a quiet spell
// the next goes at once.
func TestPacerReservesTime(t *testing.T) {
	var p pacer
	t0 := time.Unix(100, 0)
	for i := 0; i < 5; i++ {
		if got, want := p.reserve(t0, 1000, 100), t0.Add(time.Duration(i)*100*time.Millisecond); !got.Equal(want) {
			t.Fatalf("send %d may go at %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
	later := t0.Add(time.Hour)
	if got := p.reserve(later, 1000, 100); !got.Equal(later) {
		t.Fatalf("after a quiet spell the send waits until %v", got.Sub(later))
	}
	// One huge chunk at a tiny rate holds later ones at most maxPaceWait.
	var q pacer
	q.reserve(t0, 1, 1<<30)
	if got := q.reserve(t0, 1, 1); got.Sub(t0) != maxPaceWait {
		t.Fatalf("next send after a huge chunk at %v, want %v", got.Sub(t0), maxPaceWait)
	}
	// Nor do the chunks of other streams booked before it: at a tiny rate
	// each waits at most maxPaceWait, well within the receiver's idle
	// bound.
	var r pacer
	for i := 0; i < 5; i++ {
		if got := r.reserve(t0, 1, 1<<20); got.Sub(t0) > maxPaceWait {
			t.Fatalf("chunk %d of streams sharing a tiny rate waits %v, over %v", i, got.Sub(t0), maxPaceWait)
		}
	}
	if maxPaceWait > (Config{}).EnsureDefaults().SnapshotIdleTimeout/2 {
		t.Fatalf("maxPaceWait %v leaves too little of the default SnapshotIdleTimeout", maxPaceWait)
	}
}

func TestPacerUnlimitedAndCanceled(t *testing.T) {
	var p pacer
	if err := p.wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
	p.rate.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.wait(ctx, 10) // reserves 10 s
	if err := p.wait(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after cancel: %v", err)
	}
}
