package storage

import (
	"math/rand/v2"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a filesystem an engine can live on (Options.FS). It is Pebble's,
// named here so that no package outside storage imports Pebble.
type FS = vfs.FS

// CrashableFS is an in-memory filesystem for tests that can simulate a
// machine crash: CrashClone keeps only what was synced (and, if asked,
// some of what was not). Not for production use.
type CrashableFS struct{ mem *vfs.MemFS }

// NewCrashableFS returns an empty in-memory filesystem that tracks which
// writes were synced.
func NewCrashableFS() *CrashableFS { return &CrashableFS{mem: vfs.NewCrashableMem()} }

// FS is the filesystem, for Options.FS.
func (c *CrashableFS) FS() FS { return c.mem }

// CrashClone returns the filesystem a crash at this instant could leave:
// everything synced, and each unsynced data block or directory entry with
// probability unsyncedPercent/100, drawn from rng (unsyncedPercent <= 0:
// nothing unsynced; rng may then be nil). The receiver is unchanged.
func (c *CrashableFS) CrashClone(unsyncedPercent int, rng *rand.Rand) *CrashableFS {
	cfg := vfs.CrashCloneCfg{}
	if unsyncedPercent > 0 {
		cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: min(unsyncedPercent, 100), RNG: rng}
	}
	return &CrashableFS{mem: c.mem.CrashClone(cfg)}
}
