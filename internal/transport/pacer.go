package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pacer spaces out bytes sent so that their rate stays under a bound
// shared by every caller (a leaky bucket: each send reserves its share of
// the time line). A rate of 0 is unlimited. The zero pacer is unlimited.
type pacer struct {
	rate atomic.Int64 // bytes per second; 0: unlimited
	mu   sync.Mutex
	next time.Time // when the bytes reserved so far have been sent
}

// maxPaceWait bounds one chunk's wait, for its own share of the time
// line and for the shares booked before it by other streams alike: a tiny
// rate set by mistake must not hold a stream for hours (the rate change
// applies to later chunks), and a paced stream must not look idle to its
// receiver, which ends a stream after a minute without a frame
// (Config.SnapshotIdleTimeout's default, twice this). Below about
// 35 KiB/s per stream (1 MiB chunks), streams go faster than the rate.
const maxPaceWait = 30 * time.Second

// wait blocks until n more bytes may be sent, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	rate := p.rate.Load()
	if rate <= 0 {
		return nil
	}
	// The chunk may go once the bytes before it have had their time.
	if wait := time.Until(p.reserve(time.Now(), rate, n)); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// reserve books n bytes at rate from now on and returns when they may go.
func (p *pacer) reserve(now time.Time, rate int64, n int) time.Time {
	d := min(time.Duration(float64(n)/float64(rate)*float64(time.Second)), maxPaceWait)
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.next
	if start.Before(now) {
		start = now
	}
	if last := now.Add(maxPaceWait); start.After(last) {
		start = last
	}
	p.next = start.Add(d)
	return start
}

// SetSnapshotRate bounds the bytes per second of all outgoing snapshot
// streams together (0: unlimited). It applies from the next chunk sent.
func (t *GRPC) SetSnapshotRate(bytesPerSec int64) {
	t.snapPace.rate.Store(max(bytesPerSec, 0))
}
