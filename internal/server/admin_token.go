package server

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-db/cairn/internal/api/auth"
	"github.com/cairn-db/cairn/internal/storage/durable"
)

// The first admin token is written to DataDir/AdminTokenFile and never
// logged (logs are shipped to log systems; the log names the file). The
// token is drawn and kept in a file beside it (AdminTokenFile + ".pending",
// mode 0600, synced) before the cluster learns of it: a data dir that
// takes no file makes no token, and a node that stops at any point of
// the bootstrap finds its candidate again at its next start, so the
// cluster's only admin token is never one no one holds. Once the cluster
// has made it, the pending file becomes AdminTokenFile; if the cluster's
// first admin token is another's, the pending file is removed.

const pendingSuffix = ".pending"

// pendingAdminToken returns the candidate kept in dataDir, or draws one
// and keeps it there (synced) first.
func pendingAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, AdminTokenFile+pendingSuffix)
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); strings.HasPrefix(tok, "cairn_") {
			return tok, nil
		}
		// A torn write (the node stopped while keeping it): no call has
		// used it, so draw again.
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tok, _ := auth.NewToken()
	if err := writeSynced(path+".new", tok+"\n"); err != nil {
		return "", err
	}
	if err := os.Rename(path+".new", path); err != nil {
		return "", err
	}
	return tok, durable.SyncDir(dataDir)
}

// keepAdminToken makes the pending candidate dataDir's AdminTokenFile.
func keepAdminToken(dataDir string) error {
	path := filepath.Join(dataDir, AdminTokenFile)
	if err := os.Rename(path+pendingSuffix, path); err != nil {
		return err
	}
	return durable.SyncDir(dataDir)
}

// dropAdminToken removes the pending candidate of dataDir.
func dropAdminToken(dataDir string) {
	_ = os.Remove(filepath.Join(dataDir, AdminTokenFile+pendingSuffix))
}

// writeSynced writes s to a new file at path (mode 0600) and syncs it.
func writeSynced(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Sync(), f.Close())
}
