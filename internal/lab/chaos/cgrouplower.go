package chaos

import (
	"fmt"
	"time"
)

// A memory limit below what a running node holds is refused by cgroup v1
// (EBUSY) when the kernel cannot reclaim enough. A real node then has to
// give memory back by itself — Cairn's nodes follow their cgroup's limit
// and shrink Pebble's cache when it falls — so the fault holds the node at
// what it holds plus holdHeadroom (room to notice the limit before the
// next allocation meets it), follows it down as it gives memory back, and
// lowers the limit to its target as soon as the kernel takes it, noting
// how long that took.
const (
	holdHeadroom = 16 << 20
	lowerEvery   = 100 * time.Millisecond
)

// lowering retries a memory group's target limit until it holds or is
// stopped.
type lowering struct {
	target  int64
	start   time.Time
	quit    chan struct{}
	done    chan struct{}
	reached time.Duration // when the target held (-1: not yet); read after done
}

func startLowering(g *nodeGroups, target, held int64) *lowering {
	l := &lowering{target: target, start: time.Now(), quit: make(chan struct{}), done: make(chan struct{}), reached: -1}
	go func() {
		defer close(l.done)
		t := time.NewTicker(lowerEvery)
		defer t.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-t.C:
			}
			if g.setMemory(target) == nil {
				l.reached = time.Since(l.start)
				g.resetStats() // the peak at healing is the one under the target
				return
			}
			// Follow the node down: hold it at what it holds now (plus
			// the headroom) whenever that is lower than the hold, so a
			// node that sizes itself from its limit sees it fall.
			if now, ok := g.memoryUsage(); ok && now+holdHeadroom < held {
				if g.setMemory(now+holdHeadroom) == nil {
					held = now + holdHeadroom
				}
			}
		}
	}()
	return l
}

// stop ends the retries and says whether and when the target held.
func (l *lowering) stop() string {
	close(l.quit)
	<-l.done
	if l.reached < 0 {
		return fmt.Sprintf("the limit never reached its %d MB target: the node did not give enough memory back", l.target>>20)
	}
	return fmt.Sprintf("the limit reached its %d MB target %.1f s after the injection", l.target>>20, l.reached.Seconds())
}
