package storage

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	dto "github.com/prometheus/client_model/go"
)

// ErrNotFound is returned by Get for an absent key.
var ErrNotFound = errors.New("storage: not found")

// DefaultCacheSize is the block cache a node keeps unless told otherwise:
// it holds the index and filter blocks of some 10 million records (about
// 20 MB of them per node) besides hot data blocks. With 64 MiB, YCSB A
// over 10 million records re-read filter and index blocks from the files
// on nearly every read (docs/performance.md, "Growth").
const DefaultCacheSize = 128 << 20

// DefaultMemTableSize is a memtable's size unless told otherwise. Pebble
// keeps up to three of them in memory (the one being written, one being
// flushed, one kept for reuse), charged to the block cache: at 16 MiB a
// node's write path fits under a 128 MB memory limit, and 8, 16 and
// 32 MiB measured the same put throughput (docs/performance.md).
const DefaultMemTableSize = 16 << 20

// L0CompactionThreshold is the number of L0 sublevels at which Pebble
// compacts L0 into the base level (Pebble's default is 4). Every flush
// spans nearly the whole key space — each round writes every shard's
// raft state, dedup group and history events beside the user data — so
// every L0 compaction rewrites nearly the whole base level, however
// little it brings. Waiting for five times as many flushes divides that
// rewriting by five: put at 1000 clients +34 % and 30 % less node CPU per
// put (docs/performance.md, "Fewer L0 compactions"). A point read checks
// each L0 file's bloom filter first; a scan merges more files (YCSB E
// measured the same).
const L0CompactionThreshold = 20

// L0StopWritesThreshold is the number of L0 sublevels at which Pebble
// stops writes until compactions catch up (its default, 12, would sit
// below L0CompactionThreshold).
const L0StopWritesThreshold = 2 * L0CompactionThreshold

// Options configure an Engine.
type Options struct {
	// CacheSize is the block cache in bytes. Default DefaultCacheSize.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes. Default
	// DefaultMemTableSize.
	MemTableSize uint64
	// Unsafe: commit every batch without fsync. Acknowledged writes may be
	// lost on a machine crash. For experiments only, never for published
	// figures. Default false.
	UnsafeNoSync bool
	// SyncDelay, if set, is called before each WAL sync and returns the
	// least time since the previous sync: commits that ask for a sync
	// within it wait and share the next one (group commit). Nil: none.
	SyncDelay func() time.Duration
	// ValueSeparation is the smallest user value (in bytes) kept out of
	// the LSM's sstables, in Pebble's blob files, so compactions move a
	// reference instead of rewriting the value. Default
	// DefaultValueSeparation; negative: every value stays inline. Shard-local
	// records (the Raft log, the dedup table) always stay inline: they are
	// short-lived.
	ValueSeparation int
	// FS is the filesystem the engine lives on, its staging folder for
	// ingestion included. Nil: the operating system's. Tests pass an
	// in-memory one (NewCrashableFS, to simulate losing unsynced writes).
	FS FS
}

// EnsureDefaults fills zero fields.
func (o Options) EnsureDefaults() Options {
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.ValueSeparation == 0 {
		o.ValueSeparation = DefaultValueSeparation
	}
	return o
}

// Engine is one node's Pebble database.
type Engine struct {
	db     *pebble.DB
	po     *pebble.Options
	dir    string
	cache  *pebble.Cache
	budget cacheBudget
	noSync bool

	syncs   atomic.Uint64 // synced commits
	commits atomic.Uint64 // all commits
	stall   atomic.Int64  // fault injection: nanoseconds added to every commit
}

// SetCommitDelay makes every commit wait d first (fault injection: a slow or
// stalled disk). Zero heals.
func (e *Engine) SetCommitDelay(d time.Duration) { e.stall.Store(int64(d)) }

// Open opens (creating if needed) the engine in dir.
func Open(dir string, opts Options) (*Engine, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheSize)
	po := &pebble.Options{
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
		WALMinSyncInterval: opts.SyncDelay,
		FS:                 opts.FS,
	}
	// Bloom filters on every level: applying a write reads the key's
	// current value, and for a new key that read would otherwise visit
	// every level's index and data blocks to learn it is absent.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.L0CompactionThreshold, po.L0StopWritesThreshold = L0CompactionThreshold, L0StopWritesThreshold
	separateValues(po, opts.ValueSeparation)
	db, err := pebble.Open(dir, po)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	wo := po.Clone()
	wo.EnsureDefaults()
	e := &Engine{db: db, po: wo, dir: dir, cache: cache, noSync: opts.UnsafeNoSync}
	if err := e.resetStaging(); err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	if err := e.recoverDerived(); err != nil {
		db.Close()
		cache.Unref()
		return nil, err
	}
	return e, nil
}

// Close closes the engine.
func (e *Engine) Close() error {
	err := e.db.Close()
	e.cache.Unref()
	return err
}

// Stats are counters of the engine.
type Stats struct {
	Commits uint64 // batches committed
	Syncs   uint64 // batches committed with fsync
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return Stats{Commits: e.commits.Load(), Syncs: e.syncs.Load()} }

// Get returns a copy of the value of key, or ErrNotFound.
func (e *Engine) Get(key []byte) ([]byte, error) { return get(e.db, key) }

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(g getter, key []byte) ([]byte, error) {
	v, closer, err := g.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, nil
}

// NewBatch returns an empty write batch.
func (e *Engine) NewBatch() *Batch { return &Batch{b: e.db.NewBatch(), e: e} }

// NewIter iterates [lower, upper).
func (e *Engine) NewIter(lower, upper []byte) (*Iter, error) {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("storage: iter: %w", err)
	}
	return &Iter{it: it}, nil
}

// NewSnapshot returns a consistent read-only view of the engine at this
// moment. Close it when done.
func (e *Engine) NewSnapshot() *Snapshot { return &Snapshot{s: e.db.NewSnapshot()} }

// Batch is an atomic group of writes. Not safe for concurrent use.
type Batch struct {
	b *pebble.Batch
	e *Engine
}

// Set stages key=value. The batch copies both.
func (b *Batch) Set(key, value []byte) { _ = b.b.Set(key, value, nil) }

// Delete stages the removal of key.
func (b *Batch) Delete(key []byte) { _ = b.b.Delete(key, nil) }

// DeleteRange stages the removal of [start, end).
func (b *Batch) DeleteRange(start, end []byte) { _ = b.b.DeleteRange(start, end, nil) }

// Empty reports whether nothing is staged.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Len is the encoded size of the batch in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Get reads key through the batch (seeing its own staged writes).
func (b *Batch) Get(key []byte) ([]byte, error) { return get(b.b, key) }

// Commit applies the batch atomically; with sync it returns only after the
// batch (and every batch committed before it) is durable. The batch is
// closed afterwards.
func (b *Batch) Commit(sync bool) error {
	if d := b.e.stall.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	opt := pebble.NoSync
	if sync && !b.e.noSync {
		opt = pebble.Sync
		b.e.syncs.Add(1)
	}
	b.e.commits.Add(1)
	err := b.b.Commit(opt)
	b.b.Close()
	if err != nil {
		return fmt.Errorf("storage: commit: %w", err)
	}
	return nil
}

// Close discards an uncommitted batch.
func (b *Batch) Close() { _ = b.b.Close() }

// Snapshot is a consistent read-only view.
type Snapshot struct{ s *pebble.Snapshot }

// Get returns a copy of the value of key, or ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) { return get(s.s, key) }

// NewIter iterates [lower, upper) of the snapshot.
func (s *Snapshot) NewIter(lower, upper []byte) (*Iter, error) {
	it, err := s.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("storage: iter: %w", err)
	}
	return &Iter{it: it}, nil
}

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// Iter walks keys in order. Key and Value alias internal buffers valid until
// the next move.
type Iter struct{ it *pebble.Iterator }

// First moves to the first key; false if none.
func (i *Iter) First() bool { return i.it.First() }

// Last moves to the last key; false if none.
func (i *Iter) Last() bool { return i.it.Last() }

// Next moves on; false at the end.
func (i *Iter) Next() bool { return i.it.Next() }

// SeekGE moves to the first key >= k.
func (i *Iter) SeekGE(k []byte) bool { return i.it.SeekGE(k) }

// Key of the current position.
func (i *Iter) Key() []byte { return i.it.Key() }

// Value of the current position.
func (i *Iter) Value() []byte { return i.it.Value() }

// Close releases the iterator and returns any iteration error.
func (i *Iter) Close() error { return i.it.Close() }

// Steps counts the points the iterator has stepped over since it was
// made: the entries it answered and, inside Pebble, the tombstones of
// deleted keys and the older versions it skipped on the way.
func (i *Iter) Steps() uint64 { return i.it.Stats().InternalStats.PointCount }

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("storage: pebble fatal: "+format, args...))
}

// NewIndexedBatch returns a batch whose Get sees its own staged writes on top
// of the engine (used by the apply loop for conditional writes).
func (e *Engine) NewIndexedBatch() *Batch { return &Batch{b: e.db.NewIndexedBatch(), e: e} }

// NewIter iterates [lower, upper) of the batch merged with the engine
// (indexed batches only).
func (b *Batch) NewIter(lower, upper []byte) (*Iter, error) {
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("storage: iter: %w", err)
	}
	return &Iter{it: it}, nil
}

// WALFsyncs is the number of fsyncs of the write-ahead log so far. Pebble
// merges concurrent synced commits into one fsync, so this is at most
// Stats().Syncs. It computes Pebble's metrics: call it at scrape time, not
// on a hot path.
func (e *Engine) WALFsyncs() uint64 {
	h := e.db.Metrics().LogWriter.FsyncLatency
	if h == nil {
		return 0
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return 0
	}
	return m.Histogram.GetSampleCount()
}

// DiskUsage is the bytes the engine's files take on disk (tables, WAL,
// manifests: Pebble's own count). It computes Pebble's metrics: call it
// now and then, not on a hot path.
func (e *Engine) DiskUsage() uint64 { return e.db.Metrics().DiskSpaceUsage() }

// EstimateSize estimates the bytes the key range [start, end) takes on
// disk, from the sstables (and blob files) that overlap it; data still in
// the memtable is not counted. It reads no data.
func (e *Engine) EstimateSize(start, end []byte) (uint64, error) {
	return e.db.EstimateDiskUsage(start, end)
}
