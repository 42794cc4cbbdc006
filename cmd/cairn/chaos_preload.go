package main

import (
	"context"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/lab/bench"
	"github.com/cairn-db/cairn/internal/lab/chaos"
)

// defaultMemoryPreload is the records a memory scenario or sweep loads
// unless --preload says otherwise: 100 000 of 1 KiB, about 100 MB of
// values per node (every node holds every shard), so a limit of 128 MB
// meets data that does not fit.
const defaultMemoryPreload = 100_000

// preloadFor is the preload of one run of s: --preload, or for a
// scenario with a memory fault defaultMemoryPreload when --preload was
// not given. The records are YCSB's (the bench lab's ycsb workload,
// one field of --value-size bytes), loaded by the bench lab's loader.
func preloadFor(s chaos.Scenario, o runOpts) (chaos.PreloadConfig, error) {
	n := o.preload
	if n < 0 {
		n = 0
		if hasMemoryFault(s) {
			n = defaultMemoryPreload
		}
		if s.Preload > 0 {
			n = s.Preload
		}
	}
	if n == 0 {
		return chaos.PreloadConfig{}, nil
	}
	wl, err := bench.NewWorkload(bench.Params{Workload: "ycsb-a", Records: uint64(n), FieldCount: 1, FieldLength: o.valueSize})
	if err != nil {
		return chaos.PreloadConfig{}, err
	}
	_, gen := wl.Preload()
	return chaos.PreloadConfig{
		Keys: uint64(n), ValueSize: o.valueSize,
		Key: func(i uint64) []byte { k, _ := gen(i); return k },
		Load: func(ctx context.Context, eps []string) error {
			drv, err := bench.NewDriver(bench.DriverConfig{Target: strings.Join(eps, ","), Conns: 32, Pipeline: 4})
			if err != nil {
				return err
			}
			defer drv.Close()
			_, err = bench.Preload(ctx, drv, wl, 64, 10*time.Second)
			return err
		},
	}, nil
}

// hasMemoryFault: does a step of s set a memory limit?
func hasMemoryFault(s chaos.Scenario) bool {
	for _, st := range s.Steps(time.Minute) {
		if st.Fault.Kind() == "memory" {
			return true
		}
	}
	return false
}
