package backup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/internal/storage/durable"
)

// ErrTargetInUse: the directory a backup was to be written to is not
// empty (or came to exist while the backup ran); nothing of the backup
// is left in it.
var ErrTargetInUse = errors.New("backup: the target directory is not empty")

// stagePrefix begins the name of the directory a backup is written to
// until it is complete; one left by a backup that was killed has no
// manifest and may be removed.
const stagePrefix = ".backup-partial-"

// stage is where a backup is written until it is complete, so that a
// backup that fails (or is stopped) leaves nothing that looks like one:
//
//   - a target that does not exist: a new directory beside it, in the
//     same parent directory (so on the same file system), renamed to the
//     target once the manifest is written and synced: the target appears
//     whole or not at all, even through a crash;
//   - a target that exists and is empty (made by a script, or a mount
//     point): a new directory inside it, whose files are moved up into
//     the target at the end, the manifest last. The target is never
//     replaced (it may be a mount point, or have its own owner and
//     mode); only a crash during those final renames can leave shard
//     files there without a manifest, and the target is then not empty:
//     a new backup into it is refused.
//
// On failure, abort removes what the backup wrote. A stage is used by one
// goroutine (the files in dir by many).
type stage struct {
	target string
	// dir receives the shard files and the manifest.
	dir string
	// inside: dir is inside target, which existed, empty.
	inside bool
}

// newStage checks target (it must not exist or be empty) and makes the
// stage's directory.
func newStage(target string) (*stage, error) {
	target = filepath.Clean(target)
	ents, err := os.ReadDir(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := filepath.Dir(target)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
		dir, err := mkdirRandom(parent, "."+filepath.Base(target)+stagePrefix)
		if err != nil {
			return nil, fmt.Errorf("backup: the backup is written beside %s and renamed to it when complete: %w", target, err)
		}
		return &stage{target: target, dir: dir}, nil
	case err != nil:
		return nil, fmt.Errorf("backup: %w", err)
	case len(ents) > 0:
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), stagePrefix) {
				return nil, fmt.Errorf("%w: %s holds %s", ErrTargetInUse, target, e.Name())
			}
		}
		return nil, fmt.Errorf("%w: %s holds %s, the partial directory of a backup that is running or was stopped (it has no manifest): once no backup runs, remove it", ErrTargetInUse, target, ents[0].Name())
	}
	dir, err := mkdirRandom(target, stagePrefix)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return &stage{target: target, dir: dir, inside: true}, nil
}

// mkdirRandom makes a new directory in parent named prefix and a random
// suffix (mode 0755 less the umask, as a directory made by hand).
func mkdirRandom(parent, prefix string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	dir := filepath.Join(parent, prefix+hex.EncodeToString(b[:]))
	return dir, os.Mkdir(dir, 0o755)
}

// commit puts the complete backup in dir (its files and manifest synced)
// in place, and makes that durable. On failure it undoes what it did: the
// target is as before, and dir for abort to remove.
func (s *stage) commit() error {
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if !s.inside {
		if err := os.Rename(s.dir, s.target); err != nil {
			if _, serr := os.Lstat(s.target); serr == nil {
				return fmt.Errorf("%w: %s came to exist while the backup ran", ErrTargetInUse, s.target)
			}
			return fmt.Errorf("backup: %w", err)
		}
		if err := durable.SyncDir(filepath.Dir(s.target)); err != nil {
			_ = os.Rename(s.target, s.dir)
			return fmt.Errorf("backup: %w", err)
		}
		return nil
	}
	return s.moveUp()
}

// moveUp moves dir's files up into the target, the manifest last, syncs
// the target and removes dir.
func (s *stage) moveUp() (err error) {
	ents, err := os.ReadDir(s.target)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for _, e := range ents {
		if e.Name() != filepath.Base(s.dir) {
			return fmt.Errorf("%w: %s came to hold %s while the backup ran", ErrTargetInUse, s.target, e.Name())
		}
	}
	files, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	var moved []string
	defer func() {
		if err != nil { // back into dir, the manifest first
			for _, name := range slices.Backward(moved) {
				_ = os.Rename(filepath.Join(s.target, name), filepath.Join(s.dir, name))
			}
		}
	}()
	files = slices.DeleteFunc(files, func(e os.DirEntry) bool { return e.Name() == manifestFile })
	names := make([]string, 0, len(files)+1)
	for _, e := range files {
		names = append(names, e.Name())
	}
	for _, name := range append(names, manifestFile) {
		if err := os.Rename(filepath.Join(s.dir, name), filepath.Join(s.target, name)); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		moved = append(moved, name)
	}
	if err := durable.SyncDir(s.target); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The backup is complete and durable; dir is empty. Were its removal
	// to fail, or to be lost in a crash, an empty directory beside the
	// manifest harms nothing.
	_ = os.Remove(s.dir)
	_ = durable.SyncDir(s.target)
	return nil
}

// abort removes dir and everything in it.
func (s *stage) abort() error {
	return os.RemoveAll(s.dir)
}
