package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteLoadCountsChecksInARowAboveTheLimit(t *testing.T) {
	var w writeLoad
	t0 := time.Unix(100, 0)
	if r := w.observe(10, t0, 50); r != 0 || w.hot != 0 {
		t.Fatalf("first observation: rate %v, hot %d", r, w.hot)
	}
	steps := []struct {
		commit uint64
		hot    int
	}{{110, 1}, {220, 2}, {240, 0}, {400, 1}}
	for i, s := range steps {
		w.observe(s.commit, t0.Add(time.Duration(i+1)*time.Second), 50)
		if w.hot != s.hot {
			t.Fatalf("step %d (commit %d): hot %d, want %d", i, s.commit, w.hot, s.hot)
		}
	}
	if r := w.observe(1000, t0.Add(10*time.Second), 0); r == 0 || w.hot != 0 {
		t.Fatalf("no limit: rate %v, hot %d (want a rate and never hot)", r, w.hot)
	}
}

// A shard whose write load stays above SplitLoad is split by its leader
// though its data is small (size splits off); a shard without load is
// not.
func TestSplitByWriteLoad(t *testing.T) {
	c := newMoveCluster(t, 3)
	for _, id := range []uint64{1, 2, 3} {
		c.stop(id)
	}
	c.tune = func(cfg *Config) {
		cfg.SplitSize = -1
		cfg.SplitLoad = 30
		cfg.SplitLoadChecks = 3
		cfg.SplitCheckInterval = 200 * time.Millisecond
	}
	for _, id := range []uint64{1, 2, 3} {
		c.start(id, false)
	}
	before := len(c.nodes[1].st.Cover())
	time.Sleep(time.Second) // idle: five checks without load
	if n := len(c.nodes[1].st.Cover()); n != before {
		t.Fatalf("%d shards after an idle second, %d before: split without load", n, before)
	}
	ctx := moveCtx(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				k := fmt.Sprintf("hot-%d-%d", w, i)
				if _, _, err := c.put(ctx, "id-"+k, k, "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	defer func() { stop.Store(true); wg.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for len(c.nodes[1].st.Cover()) <= before {
		if time.Now().After(deadline) {
			t.Fatal("the shard never split for its write load")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
