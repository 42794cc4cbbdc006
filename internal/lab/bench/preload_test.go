package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// busyDriver answers each key's first refuse Puts with 503 (a node's or
// a shard's queue full) or, with fail, a 500; then it stores the key.
type busyDriver struct {
	Driver
	refuse int
	fail   bool
	mu     sync.Mutex
	tries  map[string]int
	stored map[string]bool
}

func (d *busyDriver) Put(_ context.Context, _ int, key, _ []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tries[string(key)]++; d.tries[string(key)] <= d.refuse {
		if d.fail {
			return &StatusError{Code: 500}
		}
		return &StatusError{Code: 503}
	}
	d.stored[string(key)] = true
	return nil
}

// The loader waits out 503s however many come (a soft limit that bites
// must not fail the load) but gives up on other errors after five tries.
func TestPreloadWaitsOutOverload(t *testing.T) {
	w, err := NewWorkload(Params{Workload: "range", Keys: 20, ValSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fail bool
		ok   bool
	}{{"503 eight times", false, true}, {"500 eight times", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &busyDriver{refuse: 8, fail: tc.fail, tries: map[string]int{}, stored: map[string]bool{}}
				n, err := Preload(context.Background(), d, w, 4, time.Second)
				if tc.ok {
					if err != nil || n != 20 || len(d.stored) != 20 {
						t.Fatalf("preload: %d records, %d stored, %v; want all 20 after the 503s", n, len(d.stored), err)
					}
					return
				}
				var se *StatusError
				if !errors.As(err, &se) || se.Code != 500 || len(d.stored) != 0 {
					t.Fatalf("preload: %v, %d stored; want a 500 after five tries", err, len(d.stored))
				}
			})
		})
	}
}
