package storage

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a filesystem an engine can live on (Options.FS). It is Pebble's,
// named here so that no package outside storage imports Pebble.
type FS = vfs.FS

// CrashableFS is an in-memory filesystem for tests that can simulate a
// machine crash: CrashClone keeps only what was synced (and, if asked,
// some of what was not). Not for production use.
type CrashableFS struct {
	mem *vfs.MemFS
	// afterSync, if set, is called after every sync of a file of FS (see
	// OnSync).
	afterSync *atomic.Pointer[func()]
}

// NewCrashableFS returns an empty in-memory filesystem that tracks which
// writes were synced.
func NewCrashableFS() *CrashableFS {
	return &CrashableFS{mem: vfs.NewCrashableMem(), afterSync: new(atomic.Pointer[func()])}
}

// FS is the filesystem, for Options.FS.
func (c *CrashableFS) FS() FS { return hookFS{FS: c.mem, after: c.afterSync} }

// OnSync has f called after every sync (of a file's data or of a
// directory) on FS, nil: none. A test that takes a CrashClone in f sees
// every state a crash could leave between two syncs: a kill at any
// instant of a multi-step operation. f runs on the syncing goroutine
// (Pebble's own, for its log) and must not write to the engine.
func (c *CrashableFS) OnSync(f func()) {
	if f == nil {
		c.afterSync.Store(nil)
		return
	}
	c.afterSync.Store(&f)
}

// CrashClone returns the filesystem a crash at this instant could leave:
// everything synced, and each unsynced data block or directory entry with
// probability unsyncedPercent/100, drawn from rng (unsyncedPercent <= 0:
// nothing unsynced; rng may then be nil). The receiver is unchanged.
func (c *CrashableFS) CrashClone(unsyncedPercent int, rng *rand.Rand) *CrashableFS {
	cfg := vfs.CrashCloneCfg{}
	if unsyncedPercent > 0 {
		cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: min(unsyncedPercent, 100), RNG: rng}
	}
	return &CrashableFS{mem: c.mem.CrashClone(cfg), afterSync: new(atomic.Pointer[func()])}
}

// hookFS is a CrashableFS's filesystem: the in-memory one, whose files
// call the OnSync hook after each sync.
type hookFS struct {
	vfs.FS
	after *atomic.Pointer[func()]
}

func (h hookFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return hookFile{File: f, after: h.after}, nil
}

func (h hookFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return h.wrap(h.FS.Create(name, category))
}

func (h hookFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return h.wrap(h.FS.Open(name, opts...))
}

func (h hookFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return h.wrap(h.FS.OpenReadWrite(name, category, opts...))
}

func (h hookFS) OpenDir(name string) (vfs.File, error) { return h.wrap(h.FS.OpenDir(name)) }

func (h hookFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return h.wrap(h.FS.ReuseForWrite(oldname, newname, category))
}

// hookFile calls the hook after each sync.
type hookFile struct {
	vfs.File
	after *atomic.Pointer[func()]
}

func (f hookFile) synced(err error) error {
	if p := f.after.Load(); p != nil && err == nil {
		(*p)()
	}
	return err
}

func (f hookFile) Sync() error     { return f.synced(f.File.Sync()) }
func (f hookFile) SyncData() error { return f.synced(f.File.SyncData()) }

func (f hookFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		err = f.synced(err)
	}
	return full, err
}
