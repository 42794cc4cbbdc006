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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// ErrBadBackup: a backup directory whose files do not match its manifest.
var ErrBadBackup = errors.New("backup: bad backup")

// Verify checks a backup directory: its manifest, and every shard file
// against the manifest's size, SHA-256 and key count and the stream's
// own end. It returns the manifest.
func Verify(dir string) (Manifest, error) {
	return verify(dir, nil)
}

// verify is Verify, calling each (when not nil) for every record read.
func verify(dir string, each func(wire.BackupRecord)) (Manifest, error) {
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
		got, err := eachRecord(io.TeeReader(f, io.MultiWriter(h, c)), func(rec wire.BackupRecord) error {
			if each != nil {
				each(rec)
			}
			return nil
		})
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
	// Ranges only ever split: two shards' ranges nest (a shard taken
	// before its split and one the split made) or do not meet. Others
	// come from two different clusters or backups.
	for i, a := range m.Shards {
		for _, b := range m.Shards[i+1:] {
			if overlap(a, b) && !nests(a, b) && !nests(b, a) {
				return m, fmt.Errorf("%w: %s and %s hold overlapping token ranges that no split makes", ErrBadBackup, a.File, b.File)
			}
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
	// IntoNonEmpty writes into a target that already holds keys (each key
	// of the backup overwrites the target's). Default: such a target is
	// refused before anything is written (ErrTargetNotEmpty).
	IntoNonEmpty bool
	// SkipEtcdZeroKeys restores a backup holding etcd keys that begin
	// with byte 0x00 without them (Restore cannot write them: see
	// ErrUnrestorable). Default: such a backup is refused.
	SkipEtcdZeroKeys bool
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

// ErrTargetNotEmpty: the target cluster already holds keys.
var ErrTargetNotEmpty = errors.New("backup: the target cluster is not empty")

// ErrUnrestorable: the backup holds etcd keys beginning with byte 0x00,
// which the etcd API stores under 0x00 0xFF. They are user data, but the
// HTTP API Restore writes through refuses every key beginning with 0x00.
var ErrUnrestorable = errors.New("backup: the backup holds keys restore cannot write")

// isEtcdZeroKey reports whether stored key k is an etcd key that began
// with byte 0x00 (internal/api/etcd/keyspace.go): 0x00 0xFF, then the
// rest of the etcd key. No record of Cairn's own has 0xFF second.
func isEtcdZeroKey(k []byte) bool { return len(k) >= 2 && k[0] == 0 && k[1] == 0xFF }

// RestoreStats counts what Restore did.
type RestoreStats struct {
	Keys     uint64 // written
	Reserved uint64 // Cairn's own records, not restored
	// EtcdZeroKeys: etcd keys beginning with byte 0x00, not restored
	// (RestoreConfig.SkipEtcdZeroKeys).
	EtcdZeroKeys uint64
	// Superseded: records of a shard taken before it split whose tokens
	// a shard taken after the split also holds (its data is the later).
	Superseded uint64
	// Leased: keys put with an etcd lease, not restored: the leases are
	// the source cluster's records, and a key restored with its lease's
	// id and no lease would never expire (a lock or an election key
	// held for ever); with etcd, such a key goes once its lease, left
	// without the clients that kept it alive, runs out.
	Leased uint64
}

// Restore verifies the backup in cfg.Dir, then writes every key of it
// into the cluster at cfg.Endpoints.
func Restore(ctx context.Context, cfg RestoreConfig) (RestoreStats, error) {
	var st RestoreStats
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	var zeroKeys uint64
	var zeroKey []byte
	m, err := verify(cfg.Dir, func(rec wire.BackupRecord) {
		if isEtcdZeroKey(rec.Key) {
			if zeroKeys++; zeroKey == nil {
				zeroKey = rec.Key
			}
		}
	})
	if err != nil {
		return st, err
	}
	if zeroKeys > 0 && !cfg.SkipEtcdZeroKeys {
		return st, fmt.Errorf("%w: %d etcd keys beginning with byte 0x00 (stored as %q…), which the HTTP API refuses; nothing was written (skip them to restore the rest)", ErrUnrestorable, zeroKeys, zeroKey)
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
	if !cfg.IntoNonEmpty {
		p, err := cl.List(ctx, client.ListOptions{Limit: 1, KeysOnly: true})
		if err != nil {
			return st, fmt.Errorf("restore: looking for keys in the target: %w", err)
		}
		if len(p.Entries) > 0 {
			return st, fmt.Errorf("%w: it holds key %q (and maybe more); nothing was written", ErrTargetNotEmpty, p.Entries[0].Key)
		}
	}
	work := make(chan wire.BackupRecord, cfg.Workers)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var written, reserved, superseded, etcdZero, leased atomic.Uint64
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
		later := laterRanges(m.Shards, s)
		_, err = eachRecord(f, func(rec wire.BackupRecord) error {
			if len(later) > 0 && slices.ContainsFunc(later, func(l ShardBackup) bool { return inRange(shard.Token(rec.Key), l) }) {
				superseded.Add(1)
				return nil
			}
			if isEtcdZeroKey(rec.Key) {
				etcdZero.Add(1)
				return nil
			}
			if slices.ContainsFunc(rec.Terms, func(t wire.IndexTerm) bool { return t.Name == wire.EtcdLeaseIndex }) {
				leased.Add(1)
				return nil
			}
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
	st.Keys, st.Reserved, st.Superseded, st.EtcdZeroKeys, st.Leased = written.Load(), reserved.Load(), superseded.Load(), etcdZero.Load(), leased.Load()
	if err := context.Cause(ctx); err != nil {
		return st, err
	}
	return st, nil
}

// laterRanges returns the shards of ss whose ranges lie inside s's and
// are narrower: shards taken after s split (a range only ever splits, so
// two ranges either nest or do not meet, and the narrower one is the
// later state of its tokens). A backup holds both when s was streamed
// before its split and the split's new shard after it.
func laterRanges(ss []ShardBackup, s ShardBackup) []ShardBackup {
	var out []ShardBackup
	for _, o := range ss {
		if nests(o, s) && (o.TokenStart != s.TokenStart || o.TokenEnd != s.TokenEnd) {
			out = append(out, o)
		}
	}
	return out
}

// nests reports whether a's token range lies inside b's (or is b's).
func nests(a, b ShardBackup) bool {
	return a.TokenStart >= b.TokenStart && (b.TokenEnd == 0 || (a.TokenEnd != 0 && a.TokenEnd <= b.TokenEnd))
}

// overlap reports whether the token ranges of a and b share a token.
func overlap(a, b ShardBackup) bool {
	return (b.TokenEnd == 0 || a.TokenStart < b.TokenEnd) && (a.TokenEnd == 0 || b.TokenStart < a.TokenEnd)
}

// inRange reports whether token tok is in s's range.
func inRange(tok uint64, s ShardBackup) bool {
	return tok >= s.TokenStart && (s.TokenEnd == 0 || tok < s.TokenEnd)
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
