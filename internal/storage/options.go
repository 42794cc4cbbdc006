package storage

import "fmt"

// Validate reports the first field of filled Options out of range.
func (o Options) Validate() error {
	switch {
	case o.CacheSize <= 0:
		return fmt.Errorf("storage: CacheSize %d: want a positive number of bytes", o.CacheSize)
	case o.MemTableSize < 1<<20:
		return fmt.Errorf("storage: MemTableSize %d: want at least 1 MiB", o.MemTableSize)
	case o.MemTableSize >= 4<<30:
		return fmt.Errorf("storage: MemTableSize %d: want less than 4 GiB", o.MemTableSize)
	}
	return nil
}
