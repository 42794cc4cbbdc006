package storage

import "sync"

// A node whose memory is limited while it runs (a container's cgroup limit
// lowered, or cairn chaos's memory faults) cannot keep a block cache sized
// for a machine without that limit: Pebble allocates the cache's blocks
// outside the Go heap, so Go's soft limit cannot reclaim them, and a cache
// that fills past the limit gets the node OOM-killed. Pebble's cache cannot
// be resized, but it can reserve part of its capacity, evicting blocks to
// make room: SetCacheBudget uses that to shrink the cache to a budget and to
// grow it back when the limit rises.
//
// Pebble also charges its memtables to the cache (it reserves a memtable's
// size from it while the memtable lives), so the cache's size is the bound
// on blocks and memtables together: a budget is what the engine may hold
// in both, and memtables come first.

// cacheBudget is the engine's current reservation of its block cache.
type cacheBudget struct {
	mu      sync.Mutex
	release func() // the reservation's release; nil when none
	budget  int64  // the cache's usable size
}

// MinCacheBudget is the smallest block cache SetCacheBudget leaves: enough
// for the index and filter blocks of a few million records.
const MinCacheBudget = 8 << 20

// SetCacheBudget bounds the block cache to n bytes (at least
// MinCacheBudget, at most the size the engine opened with), evicting
// blocks at once when it shrinks, and returns the budget in force. Blocks
// evicted are given back to the operating system (releaseFreed).
func (e *Engine) SetCacheBudget(n int64) int64 {
	size := e.cache.MaxSize()
	n = min(max(n, MinCacheBudget), size)
	b := &e.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.budget
	if prev == 0 {
		prev = size
	}
	if n == prev {
		return n
	}
	if b.release != nil {
		b.release()
		b.release = nil
	}
	if n < size {
		b.release = e.cache.Reserve(int(size - n))
	}
	b.budget = n
	if n < prev {
		releaseFreed()
	}
	return n
}

// CacheBudget returns the block cache's usable size in bytes.
func (e *Engine) CacheBudget() int64 {
	e.budget.mu.Lock()
	defer e.budget.mu.Unlock()
	if e.budget.budget == 0 {
		return e.cache.MaxSize()
	}
	return e.budget.budget
}

// CacheSize returns the bytes the block cache holds now.
func (e *Engine) CacheSize() int64 { return e.cache.Size() }
