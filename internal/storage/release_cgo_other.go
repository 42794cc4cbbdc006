//go:build cgo && !linux

package storage

// releaseFreed does nothing here: C's heap has no portable trim.
func releaseFreed() {}

// ManualInGoHeap: are Pebble's manually managed allocations (block cache,
// memtables) in the Go heap? Not with cgo: C's malloc holds them.
const ManualInGoHeap = false
