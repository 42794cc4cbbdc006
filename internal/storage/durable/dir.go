package durable

import (
	"errors"
	"os"
)

// SyncDir makes the entries of dir (files created, renamed or removed in
// it) durable. It returns the error of opening, syncing or closing dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
