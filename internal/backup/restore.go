package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// ErrBadBackup: a backup directory whose files do not match its manifest.
var ErrBadBackup = errors.New("backup: bad backup")

// Verify checks a backup directory: its manifest, and every shard file
// against the manifest's size, SHA-256 and key count and the stream's
// own end. It returns the manifest.
func Verify(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: manifest: %v", ErrBadBackup, err)
	}
	if m.Format != wire.BackupFormat || len(m.Shards) == 0 {
		return m, fmt.Errorf("%w: manifest format %d with %d shards", ErrBadBackup, m.Format, len(m.Shards))
	}
	for _, s := range m.Shards {
		f, err := os.Open(filepath.Join(dir, filepath.Base(s.File)))
		if err != nil {
			return m, fmt.Errorf("%w: %v", ErrBadBackup, err)
		}
		h, c := sha256.New(), &counter{}
		got, err := readStream(io.TeeReader(f, io.MultiWriter(h, c)))
		f.Close()
		switch {
		case err != nil:
			return m, fmt.Errorf("%w: %s: %v", ErrBadBackup, s.File, err)
		case c.n != s.Bytes || hex.EncodeToString(h.Sum(nil)) != s.SHA256 || got.Keys != s.Keys || got.Shard != s.Shard:
			return m, fmt.Errorf("%w: %s does not match the manifest", ErrBadBackup, s.File)
		case got.TokenStart != s.TokenStart || got.TokenEnd != s.TokenEnd:
			return m, fmt.Errorf("%w: %s holds another token range than the manifest says", ErrBadBackup, s.File)
		}
	}
	if at, gap := coverGap(m.Shards); gap {
		return m, fmt.Errorf("%w: no shard owns tokens from %#x on: the backup is incomplete", ErrBadBackup, at)
	}
	return m, nil
}

// RestoreConfig configures Restore, which fills its defaults and
// validates it.
type RestoreConfig struct {
	// Dir is the backup. Required.
	Dir string
	// Endpoints are the target cluster's node URLs. Required.
	Endpoints []string
	// Workers is the number of writes in flight. Default 64.
	Workers int
	// Timeout bounds each write, retries included. Default 30 s.
	Timeout time.Duration
	// Progress, when set, receives a line per shard.
	Progress io.Writer
	// Access: TLS and a bearer token (a write token) for the target's
	// nodes, as in Config.
	Access Access
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c RestoreConfig) EnsureDefaults() RestoreConfig {
	if c.Workers == 0 {
		c.Workers = 64
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

// Validate reports the first field of c (filled by EnsureDefaults) that is
// out of range.
func (c RestoreConfig) Validate() error {
	switch {
	case c.Dir == "" || len(c.Endpoints) == 0:
		return fmt.Errorf("%w: Dir and Endpoints are required", ErrInvalidConfig)
	case c.Workers < 1 || c.Timeout <= 0:
		return fmt.Errorf("%w: Workers %d, Timeout %v: want at least 1 and more than 0", ErrInvalidConfig, c.Workers, c.Timeout)
	}
	return nil
}

// RestoreStats counts what Restore did.
type RestoreStats struct {
	Keys     uint64 // written
	Reserved uint64 // Cairn's own records, not restored
}

// Restore verifies the backup in cfg.Dir, then writes every key of it
// into the cluster at cfg.Endpoints.
func Restore(ctx context.Context, cfg RestoreConfig) (RestoreStats, error) {
	var st RestoreStats
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	m, err := Verify(cfg.Dir)
	if err != nil {
		return st, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Workers, ForceAttemptHTTP2: cfg.Access.TLS != nil}
	if cfg.Access.TLS != nil {
		tr.TLSClientConfig = cfg.Access.TLS.Clone()
	}
	var rt http.RoundTripper = tr
	if cfg.Access.Token != "" {
		rt = client.WithToken(tr, cfg.Access.Token)
	}
	cl, err := client.New(cfg.Endpoints, client.Options{Timeout: cfg.Timeout, HTTP: &http.Client{Transport: rt}})
	if err != nil {
		return st, err
	}
	work := make(chan wire.BackupRecord, cfg.Workers)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var written, reserved atomic.Uint64
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				if _, err := cl.PutIndexed(ctx, w.Key, w.Data, client.PutOptions{}, indexTerms(w.Terms)); err != nil {
					cancel(fmt.Errorf("restore: key %q: %w", w.Key, err))
					return
				}
				written.Add(1)
			}
		}()
	}
	for _, s := range m.Shards {
		f, err := os.Open(filepath.Join(cfg.Dir, filepath.Base(s.File)))
		if err != nil {
			cancel(err)
			break
		}
		_, err = eachRecord(f, func(rec wire.BackupRecord) error {
			if rec.Key[0] == 0 {
				reserved.Add(1)
				return nil
			}
			select {
			case work <- rec:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		f.Close()
		if err != nil {
			cancel(err)
			break
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "shard %d: %d keys queued\n", s.Shard, s.Keys)
		}
	}
	close(work)
	wg.Wait()
	st.Keys, st.Reserved = written.Load(), reserved.Load()
	if err := context.Cause(ctx); err != nil {
		return st, err
	}
	return st, nil
}

// indexTerms is an object's terms as the client sends them (nil: none).
func indexTerms(terms []wire.IndexTerm) client.IndexTerms {
	if len(terms) == 0 {
		return nil
	}
	out := client.IndexTerms{}
	for _, t := range terms {
		out[t.Name] = append(out[t.Name], t.Text())
	}
	return out
}
