package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/client"
)

// backupFault takes a hot backup (`cairn backup`) while the workload
// runs: through the target node, or, with kill, through another node
// right after killing the target with -9 (healing restarts it). After the
// run, checkBackups restores each backup into a fresh cluster and looks
// for every unique write acknowledged before the backup started.
type backupFault struct{ kill bool }

func (f backupFault) Kind() string { return "backup" }

func (f backupFault) Param() string {
	if f.kill {
		return "target killed"
	}
	return ""
}

func (f backupFault) Inject(c *Cluster, n int) error {
	via := n
	if f.kill {
		c.Kill(n)
		via = n%c.Size() + 1
	}
	dir := filepath.Join(c.Dir(), fmt.Sprintf("backup-%d", backupSeq.Add(1)))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Bin(), "backup", "--endpoint", c.URL(via), "--to", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cairn backup through node %d: %v: %s", via, err, lastLineOf(out))
	}
	c.addBackup(backupRun{dir: dir, start: start, took: time.Since(start)})
	c.Notef("backup through node %d in %v: %s", via, time.Since(start).Round(time.Millisecond), lastLineOf(out))
	return nil
}

func (f backupFault) Heal(c *Cluster, n int) error {
	if f.kill {
		return c.Start(n)
	}
	return nil
}

// backupRun is one backup a backupFault took.
type backupRun struct {
	dir   string
	start time.Time
	took  time.Duration
}

// backupSeq names each backup's directory.
var backupSeq atomic.Int64

func (c *Cluster) addBackup(b backupRun) {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	c.backups = append(c.backups, b)
}

// takeBackups returns the backups taken so far and forgets them.
func (c *Cluster) takeBackups() []backupRun {
	c.notesMu.Lock()
	defer c.notesMu.Unlock()
	out := c.backups
	c.backups = nil
	return out
}

// BackupCheck is what restoring one backup found.
type BackupCheck struct {
	Dir     string `json:"dir"`
	StartMs int64  `json:"start_ms"`
	TookMs  int64  `json:"took_ms"`
	// AckedBefore counts the unique writes acknowledged before the backup
	// started; Missing those not found (or with another value) in a fresh
	// cluster the backup was restored into.
	AckedBefore int      `json:"acked_before"`
	Missing     int      `json:"missing"`
	MissingKeys []string `json:"missing_keys,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// checkBackups restores every backup the run took into a fresh cluster of
// its own and checks it holds each unique write acknowledged before the
// backup started.
func checkBackups(ctx context.Context, c *Cluster, rec *recorder, runStart time.Time, logf func(string, ...any)) []BackupCheck {
	var out []BackupCheck
	for i, b := range c.takeBackups() {
		bc := BackupCheck{Dir: b.dir, StartMs: b.start.Sub(runStart).Milliseconds(), TookMs: b.took.Milliseconds()}
		want := map[string]string{}
		rec.mu.Lock()
		for k, at := range rec.ackedAt {
			if at.Before(b.start) {
				want[k] = rec.acked[k]
			}
		}
		rec.mu.Unlock()
		bc.AckedBefore = len(want)
		logf("restoring backup %d (%d writes acknowledged before it) into a fresh cluster…", i+1, len(want))
		missing, err := restoreAndCheck(ctx, c, b.dir, want)
		if err != nil {
			bc.Error = err.Error()
		}
		bc.Missing = len(missing)
		if len(missing) > 10 {
			missing = missing[:10]
		}
		bc.MissingKeys = missing
		out = append(out, bc)
	}
	return out
}

func restoreAndCheck(ctx context.Context, c *Cluster, dir string, want map[string]string) ([]string, error) {
	fresh, err := StartCluster(ClusterConfig{Bin: c.Bin(), Nodes: c.Size(), Dir: dir + "-restored", NoFaultInjection: true, Partitions: PartitionsHook})
	if err != nil {
		return nil, err
	}
	defer fresh.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(rctx, c.Bin(), "restore", "--from", dir, "--endpoints", strings.Join(fresh.Endpoints(), ",")).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("cairn restore: %v: %s", err, lastLineOf(out))
	}
	cl, err := client.New(fresh.Endpoints(), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	var missing []string
	for k, v := range want {
		got, err := cl.Get(rctx, []byte(k), false)
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			return missing, fmt.Errorf("reading %s from the restored cluster: %w", k, err)
		}
		if err != nil || string(got.Value) != v {
			missing = append(missing, k)
		}
	}
	return missing, nil
}

func lastLineOf(out []byte) string {
	l := strings.Split(strings.TrimSpace(string(out)), "\n")
	return l[len(l)-1]
}
