//go:build !cgo

package storage

import "runtime/debug"

// releaseFreed gives freed memory back to the operating system. Without
// cgo, Pebble's cache blocks and memtables live in the Go heap: a
// collection frees the evicted ones and FreeOSMemory returns their pages.
func releaseFreed() { debug.FreeOSMemory() }

// ManualInGoHeap: are Pebble's manually managed allocations (block cache,
// memtables) in the Go heap? Without cgo they are Go allocations.
const ManualInGoHeap = true
