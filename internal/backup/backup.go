package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// Manifest is a backup's manifest.json.
type Manifest struct {
	Format      int           `json:"format"`
	Endpoint    string        `json:"endpoint"`
	Replication int           `json:"replication"`
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished"`
	Shards      []ShardBackup `json:"shards"`
}

// ShardBackup describes one shard's file.
type ShardBackup struct {
	wire.BackupHeader
	File   string `json:"file"`
	Keys   uint64 `json:"keys"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Node is the node whose replica sent the data.
	Node uint64 `json:"node"`
}

// Keys is the total key count.
func (m Manifest) Keys() (n uint64) {
	for _, s := range m.Shards {
		n += s.Keys
	}
	return n
}

// Bytes is the total size of the shard files.
func (m Manifest) Bytes() (n int64) {
	for _, s := range m.Shards {
		n += s.Bytes
	}
	return n
}

const manifestFile = "manifest.json"

// Limits a backup's reader applies to each record (a node's own limits
// are lower).
const (
	maxKey  = 64 << 10
	maxData = 1 << 30
)

// Config of a backup. Backup fills its defaults and validates it.
type Config struct {
	// Endpoint is any node's URL. Required.
	Endpoint string
	// Dir receives the backup; it must not exist or be empty. The backup
	// is put there only once complete (a failed one leaves Dir as it
	// was). Required.
	Dir string
	// Parallel is how many shards stream at once. Default 2.
	Parallel int
	// Progress, when set, receives a line per shard.
	Progress io.Writer
	// Access: TLS for https:// nodes and a bearer token for nodes with
	// --auth (an admin token). Default: plain HTTP for an http://
	// Endpoint, TLS with the system's roots for an https:// one; no token.
	Access Access
}

// Access is how the tool reaches the nodes: TLS (the nodes' CA and, where
// they require one, a client certificate) for https:// endpoints, and a
// bearer token for nodes started with --auth.
type Access struct {
	TLS   *tls.Config
	Token string
}

// EnsureDefaults returns a copy of c with every zero field set to its
// default.
func (c Config) EnsureDefaults() Config {
	if c.Parallel == 0 {
		c.Parallel = 2
	}
	return c
}

// ErrInvalidConfig is wrapped by Validate's errors.
var ErrInvalidConfig = errors.New("backup: invalid config")

// Validate reports the first field of c (filled by EnsureDefaults) that is
// out of range.
func (c Config) Validate() error {
	switch {
	case c.Endpoint == "" || c.Dir == "":
		return fmt.Errorf("%w: Endpoint and Dir are required", ErrInvalidConfig)
	case c.Parallel < 1:
		return fmt.Errorf("%w: Parallel %d: want at least 1", ErrInvalidConfig, c.Parallel)
	}
	return nil
}

// httpClient speaks HTTP/2 to the nodes, which serve backup streams over
// HTTP/2 only: over TLS (ALPN h2) when Access has TLS, else without TLS
// (prior knowledge); with the token in every request.
func (a Access) httpClient() *http.Client {
	p := new(http.Protocols)
	tr := &http.Transport{Protocols: p}
	if a.TLS != nil {
		p.SetHTTP2(true)
		tr.TLSClientConfig = a.TLS.Clone()
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	var rt http.RoundTripper = tr
	if a.Token != "" {
		rt = client.WithToken(tr, a.Token)
	}
	return &http.Client{Transport: rt}
}

// scheme is the URL scheme of the nodes.
func (a Access) scheme() string {
	if a.TLS != nil {
		return "https://"
	}
	return "http://"
}

// Backup takes a backup of the cluster cfg.Endpoint belongs to into
// cfg.Dir. The backup is written beside cfg.Dir (inside it when it exists,
// empty) and put in place only once complete (see stage): a backup that
// fails, or whose ctx is cancelled, leaves cfg.Dir as it found it.
func Backup(ctx context.Context, cfg Config) (Manifest, error) {
	cfg = cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return Manifest{}, err
	}
	if cfg.Access.TLS == nil && strings.HasPrefix(strings.TrimSpace(cfg.Endpoint), "https://") {
		// Nodes whose certificates the system's roots trust: every node
		// is reached over TLS, the shard streams too (over plain HTTP/2
		// they would fail, the token sent in clear).
		cfg.Access.TLS = &tls.Config{}
	}
	st, err := newStage(cfg.Dir)
	if err != nil {
		return Manifest{}, err
	}
	m, err := take(ctx, cfg, st.dir)
	if err == nil {
		err = st.commit()
	}
	if err != nil {
		return m, errors.Join(err, st.abort())
	}
	return m, nil
}

// take writes a backup of the cluster into dir: the shard files, then
// the manifest, each synced.
func take(ctx context.Context, cfg Config, dir string) (Manifest, error) {
	m := Manifest{Format: wire.BackupFormat, Endpoint: cfg.Endpoint, Started: time.Now().UTC()}
	hc := cfg.Access.httpClient()
	ci, err := client.NewAdmin(cfg.Endpoint, hc).Cluster(ctx)
	if err != nil {
		return m, fmt.Errorf("backup: reading the cluster from %s: %w", cfg.Endpoint, err)
	}
	m.Replication = ci.Replication
	addrs := map[uint64]string{}
	for _, mem := range ci.Members {
		addrs[mem.NodeID] = mem.HTTPAddr
	}
	// The shards fetched must own the whole token ring together. A shard
	// that splits during the backup keeps its id and narrows its range,
	// and the new shard holding the rest is one the first reading of the
	// cluster did not list: read it again and fetch what is missing.
	fetched := map[uint64]bool{}
	shards := ci.Shards
	for round := 0; ; round++ {
		var todo []client.ShardInfo
		for _, s := range shards {
			if !fetched[s.ID] {
				todo = append(todo, s)
			}
		}
		got, err := fetchShards(ctx, cfg, hc, todo, addrs, dir)
		for _, sb := range got {
			fetched[sb.Shard] = true
		}
		m.Shards = append(m.Shards, got...)
		if err != nil {
			return m, err
		}
		at, gap := coverGap(m.Shards)
		if !gap {
			break
		}
		if round == coverRounds {
			return m, fmt.Errorf("backup: no shard fetched owns tokens from %#x on (a shard split during the backup, and %s does not know the new shard yet): the backup is incomplete, take it again", at, cfg.Endpoint)
		}
		select {
		case <-time.After(coverWait):
		case <-ctx.Done():
			return m, ctx.Err()
		}
		if ci, err = client.NewAdmin(cfg.Endpoint, hc).Cluster(ctx); err != nil {
			return m, fmt.Errorf("backup: reading the cluster from %s: %w", cfg.Endpoint, err)
		}
		for _, mem := range ci.Members {
			addrs[mem.NodeID] = mem.HTTPAddr
		}
		shards = ci.Shards
	}
	sort.Slice(m.Shards, func(i, j int) bool { return m.Shards[i].Shard < m.Shards[j].Shard })
	m.Finished = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	// The manifest last: a directory without one is no backup. The
	// stage's commit syncs the directories.
	return m, writeFileSync(filepath.Join(dir, manifestFile), b)
}

// coverRounds bounds the extra readings of the cluster for shards a split
// made during the backup.
const coverRounds = 5

// coverWait is the pause before each extra reading.
var coverWait = time.Second

// fetchShards streams shards, cfg.Parallel at a time, and returns those
// fetched and the errors of the others.
func fetchShards(ctx context.Context, cfg Config, hc *http.Client, shards []client.ShardInfo, addrs map[uint64]string, dir string) ([]ShardBackup, error) {
	var (
		mu   sync.Mutex
		out  []ShardBackup
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, cfg.Parallel)
	)
	for _, s := range shards {
		wg.Add(1)
		sem <- struct{}{}
		go func(s client.ShardInfo) {
			defer func() { <-sem; wg.Done() }()
			sb, err := backupShard(ctx, hc, cfg.Access.scheme(), s, addrs, dir, clusterLayout(cfg.Endpoint, hc))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out = append(out, sb)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "shard %d: %d keys, %d bytes at applied index %d (from node %d)\n", sb.Shard, sb.Keys, sb.Bytes, sb.Applied, sb.Node)
			}
		}(s)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// coverGap returns the first token that no shard of ss owns (gap false:
// they own the whole ring). Ranges may overlap: a shard fetched before a
// split and the new one fetched after it.
func coverGap(ss []ShardBackup) (at uint64, gap bool) {
	sorted := slices.SortedFunc(slices.Values(ss), func(a, b ShardBackup) int { return cmp.Compare(a.TokenStart, b.TokenStart) })
	return shard.FirstGap(sorted, func(s ShardBackup) (uint64, uint64) { return s.TokenStart, s.TokenEnd })
}

// backupShard streams shard s from its leader (else another replica) into
// dir, checking the stream as it is written. A shard that moved while the
// backup ran is looked for again: when no replica it knows holds the
// shard any more (each answers no_replica, or has no known address), it
// asks relayout where the shard's replicas are now, up to shardMoves
// times.
func backupShard(ctx context.Context, hc *http.Client, scheme string, s client.ShardInfo, addrs map[uint64]string, dir string, relayout layoutFunc) (ShardBackup, error) {
	var last error
	// A node may be down or the shard in an election: try every replica,
	// a few rounds.
	rounds, moves := 0, 0
	for {
		tried, gone := 0, 0
		for _, n := range append([]uint64{s.Leader}, s.Replicas...) {
			if n == 0 || addrs[n] == "" {
				continue
			}
			tried++
			sb, err := fetchShard(ctx, hc, scheme, s.ID, n, addrs[n], dir)
			if err == nil {
				return sb, nil
			}
			last = err
			if errors.Is(err, errNoReplica) {
				gone++
			}
			if ctx.Err() != nil {
				break
			}
		}
		moved := gone == tried && moves < shardMoves
		if tried == 0 {
			last = fmt.Errorf("no known address for its replicas %v", s.Replicas)
		}
		if moved {
			moves++
		} else if rounds++; rounds == shardRounds {
			return ShardBackup{}, fmt.Errorf("backup: shard %d: %w", s.ID, last)
		}
		select {
		case <-time.After(shardRetryWait):
		case <-ctx.Done():
			return ShardBackup{}, fmt.Errorf("backup: shard %d: %w (last: %w)", s.ID, ctx.Err(), last)
		}
		if moved {
			ns, na, err := relayout(ctx, s.ID)
			if err != nil {
				last = fmt.Errorf("%w; looking for where it moved: %w", last, err)
				continue
			}
			s, addrs = ns, na
		}
	}
}

// layoutFunc returns shard id's place in the cluster as a node knows it
// now (its replicas and leader) and the nodes' addresses.
type layoutFunc func(ctx context.Context, id uint64) (client.ShardInfo, map[uint64]string, error)

// clusterLayout is a layoutFunc reading the cluster from endpoint.
func clusterLayout(endpoint string, hc *http.Client) layoutFunc {
	return func(ctx context.Context, id uint64) (client.ShardInfo, map[uint64]string, error) {
		ci, err := client.NewAdmin(endpoint, hc).Cluster(ctx)
		if err != nil {
			return client.ShardInfo{}, nil, fmt.Errorf("reading the cluster from %s: %w", endpoint, err)
		}
		addrs := map[uint64]string{}
		for _, mem := range ci.Members {
			addrs[mem.NodeID] = mem.HTTPAddr
		}
		for _, s := range ci.Shards {
			if s.ID == id {
				return s, addrs, nil
			}
		}
		return client.ShardInfo{}, nil, fmt.Errorf("%s lists no shard %d", endpoint, id)
	}
}

// errNoReplica: the node asked for a shard's stream holds no replica of
// the shard (it moved off the node, or never was there): the node's
// answer 404 no_replica.
var errNoReplica = errors.New("backup: 404 no_replica")

// shardMoves bounds the readings of the cluster, per shard, for where a
// shard moved while the backup ran.
const shardMoves = 3

// shardRounds is how many times a shard's replicas are each tried.
const shardRounds = 3

// shardRetryWait is the pause before each further round.
var shardRetryWait = time.Second

// stallTimeout: an attempt that receives nothing for this long (its node
// paused, or cut off without the connection failing) is abandoned, and
// the shard's next replica is tried.
var stallTimeout = 30 * time.Second

func fetchShard(ctx context.Context, hc *http.Client, scheme string, shard, node uint64, addr, dir string) (_ ShardBackup, err error) {
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	url := fmt.Sprintf("%s%s/v1/admin/backup/shards/%d", scheme, addr, shard)
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("node %d sent nothing for %v", node, stallTimeout)
	watch := time.AfterFunc(stallTimeout, func() { cancel(stalled) })
	defer watch.Stop()
	defer func() {
		if err != nil && context.Cause(actx) == stalled {
			err = stalled
		}
	}()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
	if err != nil {
		return ShardBackup{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ShardBackup{}, err
	}
	resp.Body = progressBody{resp.Body, func() { watch.Reset(stallTimeout) }}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var answer struct{ Error, Message string }
		if resp.StatusCode == http.StatusNotFound && json.Unmarshal(b, &answer) == nil && answer.Error == "no_replica" {
			return ShardBackup{}, fmt.Errorf("node %d: %w: %s", node, errNoReplica, answer.Message)
		}
		return ShardBackup{}, fmt.Errorf("node %d: %s: %s", node, resp.Status, strings.TrimSpace(string(b)))
	}
	name := fmt.Sprintf("shard-%d.cbk", shard)
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return ShardBackup{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &counter{}
	// Read the stream as it is written to the file: a stream cut short
	// fails here, not at restore.
	sb, err := readStream(io.TeeReader(resp.Body, io.MultiWriter(f, h, cw)))
	if err != nil {
		return ShardBackup{}, fmt.Errorf("node %d: %w", node, err)
	}
	if err := f.Sync(); err != nil {
		return ShardBackup{}, err
	}
	sb.File, sb.Bytes, sb.SHA256, sb.Node = name, cw.n, hex.EncodeToString(h.Sum(nil)), node
	return sb, nil
}

// readStream reads a whole backup stream, checking its end, and returns
// its header and key count.
func readStream(r io.Reader) (ShardBackup, error) {
	return eachRecord(r, func(wire.BackupRecord) error { return nil })
}

// eachRecord reads a backup stream and calls fn for every record.
func eachRecord(r io.Reader, fn func(wire.BackupRecord) error) (ShardBackup, error) {
	br, err := wire.NewBackupReader(r)
	if err != nil {
		return ShardBackup{}, err
	}
	for {
		rec, err := br.Next(maxKey, maxData)
		if err == io.EOF {
			return ShardBackup{BackupHeader: br.Header, Keys: br.Count()}, nil
		}
		if err != nil {
			return ShardBackup{}, err
		}
		if err := fn(rec); err != nil {
			return ShardBackup{}, err
		}
	}
}

// progressBody calls progress at each read that returns bytes.
type progressBody struct {
	io.ReadCloser
	progress func()
}

func (p progressBody) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		p.progress()
	}
	return n, err
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
