package storage

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// stagingDir is the folder of the data dir where received snapshots are
// spilled as sstables before they are ingested. It is emptied at Open: a
// file left there by a crash belongs to a snapshot that was never installed.
const stagingDir = "staging"

func (e *Engine) resetStaging() error {
	d := filepath.Join(e.dir, stagingDir)
	if err := e.po.FS.RemoveAll(d); err != nil {
		return fmt.Errorf("storage: clear %s: %w", d, err)
	}
	if err := e.po.FS.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("storage: create %s: %w", d, err)
	}
	return nil
}

// StagingDir is the folder for files that are to be ingested (on the same
// file system as the engine, so ingestion links rather than copies). It is
// emptied whenever the engine opens.
func (e *Engine) StagingDir() string { return filepath.Join(e.dir, stagingDir) }

// RemoveStaged removes a file of StagingDir (on the engine's filesystem,
// Options.FS).
func (e *Engine) RemoveStaged(path string) error { return e.po.FS.Remove(path) }

// SSTWriter builds one sstable for Ingest. Keys must be added in strictly
// increasing order, range deletions in order and not overlapping each
// other. Not safe for concurrent use.
type SSTWriter struct {
	fs   vfs.FS
	w    *sstable.Writer
	path string
	n    int
	done bool
}

// NewSSTWriter creates the sstable file path (in StagingDir, on the
// engine's filesystem). The file is written back to disk as it grows
// (every Options.BytesPerSync bytes, as Pebble does for its own tables)
// rather than in one burst when it is finished: a received snapshot of
// tens of megabytes synced at once stalls the WAL syncs of every write
// sharing the disk for as long as the burst lasts.
func (e *Engine) NewSSTWriter(path string) (*SSTWriter, error) {
	f, err := e.po.FS.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("storage: create sstable: %w", err)
	}
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: e.po.BytesPerSync})
	opts := e.po.MakeWriterOptions(0, e.db.TableFormat())
	return &SSTWriter{fs: e.po.FS, w: sstable.NewWriter(objstorageprovider.NewFileWritable(f), opts), path: path}, nil
}

// Set adds key=value. The writer copies both.
func (w *SSTWriter) Set(key, value []byte) error {
	w.n++
	if err := w.w.Set(key, value); err != nil {
		return fmt.Errorf("storage: sstable set: %w", err)
	}
	return nil
}

// DeleteRange adds the removal of [start, end) of what the engine holds
// before ingestion (it does not delete keys of the same sstable).
func (w *SSTWriter) DeleteRange(start, end []byte) error {
	w.n++
	if err := w.w.DeleteRange(start, end); err != nil {
		return fmt.Errorf("storage: sstable delete range: %w", err)
	}
	return nil
}

// Path is the file being written.
func (w *SSTWriter) Path() string { return w.path }

// Finish completes and syncs the file.
func (w *SSTWriter) Finish() error {
	if w.done {
		return nil
	}
	w.done = true
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("storage: finish sstable: %w", err)
	}
	return nil
}

// Abort closes and removes the file.
func (w *SSTWriter) Abort() {
	if !w.done {
		w.done = true
		_ = w.w.Close()
	}
	_ = w.fs.Remove(w.path)
}

// Ingest adds the sstables atomically: after a crash either all of their
// contents are visible or none, and each file's keys shadow what the engine
// held before (its range deletions delete older keys). The files must not
// overlap each other. They are linked into the engine; the caller removes
// the originals.
func (e *Engine) Ingest(paths []string) error {
	if err := e.db.Ingest(context.Background(), paths); err != nil {
		return fmt.Errorf("storage: ingest: %w", err)
	}
	return nil
}
