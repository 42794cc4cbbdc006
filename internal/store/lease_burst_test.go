package store

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-db/cairn/internal/storage"
)

// TestLeaseOutlastsTickBurst (review): the ticks store.ticker hands a
// follower right after it hears the leader can come in a burst of two,
// and the third any time after. The loop receives a tick from its
// time.Ticker, and its goroutine is descheduled (CPU starvation)
// before it reaches the follower's replica; meanwhile a worker steps the
// leader's heartbeat there. When the loop goes on, the follower gets that
// tick, then at once the tick the Ticker kept pending, then the next
// period boundary. Raft's follower refuses votes until it has counted an
// election timeout of ticks since the heartbeat; here that is only 702 ms
// of the follower's clock, so a lease must end, with the 10 % the store
// allows for clock rates, before that: LeaseDuration × 1.1 < the window.
func TestLeaseOutlastsTickBurst(t *testing.T) {
	c := Config{NodeID: 1, Engine: &storage.Engine{}}.EnsureDefaults()
	var window time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tk := time.NewTicker(c.TickInterval)
		defer tk.Stop()
		<-tk.C                                  // the loop takes boundary 1 (100 ms)...
		time.Sleep(c.TickInterval*2 - 1e6)      // ...and stalls before the follower
		heard := time.Since(start) - 1e6        // the heartbeat is stepped at 298 ms
		ticks := 1                              // the stalled loop reaches the follower
		for ; ticks < c.ElectionTick; ticks++ { // the pending tick, then each boundary
			<-tk.C
		}
		window = time.Since(start) - heard
	})
	t.Logf("%d ticks %s after the heartbeat; lease %s", c.ElectionTick, window, c.LeaseDuration())
	if lease := c.LeaseDuration() * 11 / 10; lease >= window {
		t.Errorf("lease %s (+10 %% = %s) outlasts the follower's vote refusal after a tick burst (%s)",
			c.LeaseDuration(), lease, window)
	}
}
