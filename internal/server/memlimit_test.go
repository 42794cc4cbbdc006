package server

import "testing"

func TestPebbleBudgetFollowsTheLimit(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int64
	}{
		{0, noLimit},            // no cgroup limit: the opened size
		{1 << 63, noLimit},      // "max" as some kernels report it
		{100 << 20, 35 << 20},   // pebbleShare of the limit
		{1000 << 20, 350 << 20}, // above the opened size: SetCacheBudget clamps
	} {
		if got := pebbleBudget(tc.limit); got != tc.want {
			t.Errorf("pebbleBudget(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

func TestMemTableSizeFitsTheLimit(t *testing.T) {
	for _, tc := range []struct{ limit, want uint64 }{
		{0, 16 << 20},        // no limit: the default
		{128 << 20, 4 << 20}, // the floor
		{256 << 20, 8 << 20}, // a thirty-second
		{64 << 30, 16 << 20}, // never above the default
	} {
		if got := memTableSize(tc.limit); got != tc.want {
			t.Errorf("memTableSize(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}
