//go:build cgo && linux

package storage

// #include <malloc.h>
import "C"

// releaseFreed gives the C heap's free pages back to the operating system.
// With cgo, Pebble allocates its cache blocks and memtables with C's
// malloc, and glibc keeps the pages of small freed blocks mapped (they
// count against a cgroup's limit) until asked to trim.
func releaseFreed() { C.malloc_trim(0) }

// ManualInGoHeap: are Pebble's manually managed allocations (block cache,
// memtables) in the Go heap? Not with cgo: C's malloc holds them.
const ManualInGoHeap = false
