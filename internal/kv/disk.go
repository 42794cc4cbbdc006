package kv

import (
	"errors"
	"fmt"
)

var (
	// ErrDiskFull: the node's data directory is out of space (its free
	// space is below the node's reserve, or the fault hook says so);
	// nothing was written. HTTP 507; reads and deletes still work.
	ErrDiskFull = errors.New("kv: disk full")
	// ErrQuotaExceeded: the node's storage uses more than its quota
	// (cairn serve --quota-bytes); nothing was written. HTTP 507; reads
	// and deletes (which free space) still work.
	ErrQuotaExceeded = errors.New("kv: storage quota exceeded")
)

// Reasons a node refuses writes (DiskState.Refusing).
const (
	DiskFull      = "disk_full"
	QuotaExceeded = "quota_exceeded"
)

// DiskState is what the node's disk guard last found.
type DiskState struct {
	// Refusing is "" while the node takes writes, else DiskFull or
	// QuotaExceeded.
	Refusing string `json:"refusing,omitempty"`
	// Injected: the fault hook makes the disk look full (cairn chaos
	// --fault disk-full), whatever the real free space.
	Injected bool `json:"injected,omitempty"`
	// FreeBytes is the free space of the data directory's filesystem
	// (for an unprivileged user); ReserveBytes the least the node keeps.
	FreeBytes    uint64 `json:"free_bytes"`
	ReserveBytes uint64 `json:"reserve_bytes"`
	// UsedBytes is what the storage engine's files take; QuotaBytes its
	// limit (0: none).
	UsedBytes  uint64 `json:"used_bytes"`
	QuotaBytes uint64 `json:"quota_bytes,omitempty"`
}

// admitPut is nil when the node takes a new value, else ErrDiskFull or
// ErrQuotaExceeded. Deletes are always let through: they free space.
func (c *Coordinator) admitPut() error {
	if c.cfg.Disk == nil {
		return nil
	}
	switch d := c.cfg.Disk(); d.Refusing {
	case DiskFull:
		return fmt.Errorf("%w: %d bytes free, reserve %d", ErrDiskFull, d.FreeBytes, d.ReserveBytes)
	case QuotaExceeded:
		return fmt.Errorf("%w: %d bytes used, quota %d", ErrQuotaExceeded, d.UsedBytes, d.QuotaBytes)
	}
	return nil
}
