package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/cairn-db/cairn/client"
)

// PreloadConfig puts real data under a chaos run: Keys records of
// ValueSize bytes loaded before the workload starts, and a share of every
// register client's operations reading and updating them, so that caches,
// memtables and compactions work as on a production node. The loader is
// given by the caller (cairn chaos passes the bench lab's), since the lab
// packages do not depend on each other's drivers.
type PreloadConfig struct {
	// Keys is the number of records; default 0: no preload.
	Keys uint64
	// ValueSize is each record's bytes. Default 1024.
	ValueSize int
	// Load writes the records through the cluster's endpoints. Required
	// with Keys.
	Load func(ctx context.Context, endpoints []string) error
	// Key is record i's key (the loader's). Required with Keys.
	Key func(i uint64) []byte
	// Percent of each register client's operations that go to the
	// records, half reads and half updates. Default 50.
	Percent int
}

// EnsureDefaults returns a copy of p with every zero field set to its
// default.
func (p PreloadConfig) EnsureDefaults() PreloadConfig {
	if p.ValueSize == 0 {
		p.ValueSize = 1024
	}
	if p.Percent == 0 {
		p.Percent = 50
	}
	return p
}

// Validate reports the first field of p (filled by EnsureDefaults) that
// is out of range.
func (p PreloadConfig) Validate() error {
	switch {
	case p.ValueSize < 1 || p.ValueSize > 8<<20:
		return fmt.Errorf("%w: Preload.ValueSize %d: want 1 to 8 MiB", ErrInvalidConfig, p.ValueSize)
	case p.Percent < 1 || p.Percent > 100:
		return fmt.Errorf("%w: Preload.Percent %d: want 1 to 100", ErrInvalidConfig, p.Percent)
	case p.Keys > 0 && (p.Load == nil || p.Key == nil):
		return fmt.Errorf("%w: Preload of %d keys without Load and Key", ErrInvalidConfig, p.Keys)
	}
	return nil
}

// dataOp reads or updates a random record (half each) and records it in
// the throughput series as data-read or data-update; the records are not
// registers (their values are not unique), so the checker does not see
// them, but a failed operation counts in the run's client errors.
func dataOp(rec *recorder, cl *client.Client, p PreloadConfig, rng *rand.Rand, val []byte) {
	k := p.Key(uint64(rng.Int63n(int64(p.Keys))))
	start := time.Now()
	if rng.Intn(2) == 0 {
		_, err := cl.Get(context.Background(), k, false)
		if errors.Is(err, client.ErrNotFound) {
			err = nil
		}
		rec.record("data-read", start, time.Now(), err)
		return
	}
	rng.Read(val[:min(8, len(val))]) // a new value each time
	_, err := cl.Put(context.Background(), k, val, client.PutOptions{})
	rec.record("data-update", start, time.Now(), err)
}
