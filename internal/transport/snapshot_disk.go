package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// ErrDiskReserve: an incoming snapshot would take the receiving node's
// disk below its reserve (Config.DiskFree, Config.DiskReserve), so it was
// refused at its start or cut while it came. The sender retries later.
var ErrDiskReserve = errors.New("transport: snapshot refused: the disk is at its reserve")

// diskLogEvery spaces the warnings about snapshots refused for the disk
// reserve (a sender retries every few heartbeats).
const diskLogEvery = 10 * time.Second

// diskRoom measures the free space of the filesystem incoming snapshots
// are spilled to (Config.DiskFree) against the node's reserve
// (Config.DiskReserve): at a stream's start and as each chunk arrives,
// before the handler spills it.
type diskRoom struct {
	free    func() (uint64, error) // nil: no check
	reserve uint64
	// lastLog is when a refusal or a failed measure was last logged
	// (unix nanos).
	lastLog atomic.Int64
	log     *slog.Logger
}

// check returns an error wrapping ErrDiskReserve if spilling incoming
// more bytes would leave less than the reserve free, or nothing at all
// (so a filesystem with no space left refuses even with a zero reserve).
// A failed measure lets the stream go on, as the disk guard keeps its
// last finding: the check keeps the engine off a full disk, and a
// filesystem that cannot be measured is not known to be full.
func (d *diskRoom) check(incoming int) error {
	if d.free == nil {
		return nil
	}
	free, err := d.free()
	if err != nil {
		d.warn("transport: free space unknown; receiving the snapshot anyway", "err", err)
		return nil
	}
	if free < d.reserve+uint64(incoming) || free == 0 {
		return fmt.Errorf("%w: %d bytes free on the data directory's filesystem, %d more to spill, disk reserve %d bytes",
			ErrDiskReserve, free, incoming, d.reserve)
	}
	return nil
}

// warn logs at most once every diskLogEvery.
func (d *diskRoom) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	prev := d.lastLog.Load()
	if now-prev < int64(diskLogEvery) || !d.lastLog.CompareAndSwap(prev, now) {
		return
	}
	d.log.Warn(msg, args...)
}
