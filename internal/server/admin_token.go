package server

import (
	"errors"
	"os"
	"path/filepath"
)

// The first admin token is written to DataDir/AdminTokenFile and never
// logged (logs are shipped to log systems; the log names the file). The
// file is so its only copy: it is prepared before the token is made (a
// data dir that takes no file makes no token) and filled once it is.

// tokenFile is AdminTokenFile being prepared: a file beside it, mode
// 0600, renamed over it once it holds the token.
type tokenFile struct {
	f    *os.File
	path string // the final name
}

// prepareTokenFile creates the file the first admin token will go to.
func prepareTokenFile(dataDir string) (*tokenFile, error) {
	path := filepath.Join(dataDir, AdminTokenFile)
	f, err := os.OpenFile(path+".new", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &tokenFile{f: f, path: path}, nil
}

// save writes tok, syncs it and puts it under its final name.
func (t *tokenFile) save(tok string) error {
	_, err := t.f.WriteString(tok + "\n")
	err = errors.Join(err, t.f.Sync(), t.f.Close())
	if err == nil {
		err = os.Rename(t.f.Name(), t.path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(t.path)); err == nil {
			err = errors.Join(d.Sync(), d.Close())
		}
	}
	return err
}

// discard removes the prepared file (no token was made).
func (t *tokenFile) discard() {
	_ = t.f.Close()
	_ = os.Remove(t.f.Name())
}
