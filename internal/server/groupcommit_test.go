package server

import (
	"testing"
	"time"
)

func TestGroupCommitDelayScalesWithWaitingWrites(t *testing.T) {
	const d = 10 * time.Millisecond
	for _, c := range []struct {
		pending int64
		want    time.Duration
	}{{0, 0}, {1, 0}, {63, 0}, {64, d / 4}, {128, d / 2}, {256, d}, {5000, d}} {
		if got := groupCommitDelay(c.pending, d, 256); got != c.want {
			t.Errorf("%d writes waiting: delay %v, want %v", c.pending, got, c.want)
		}
	}
	if got := groupCommitDelay(1000, 0, 256); got != 0 {
		t.Errorf("disabled: %v", got)
	}
}
