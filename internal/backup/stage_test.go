package backup

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

const half = uint64(1) << 63

// twoShardNode is a fake one-node cluster of two shards, [0, 2^63) and
// [2^63, 2^64), whose streams second serves: shard 1's stream is whole,
// shard 2's is whatever second makes of it. It returns the node's URL.
func twoShardNode(t *testing.T, second http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	addr := ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(client.ClusterInfo{NodeID: 1, Replication: 1,
			Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: addr, Reachable: true}},
			Shards: []client.ShardInfo{
				{ID: 1, TokenStart: "0", TokenEnd: "8000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1},
				{ID: 2, TokenStart: "8000000000000000", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1}}})
	})
	mux.HandleFunc("/v1/admin/backup/shards/1", func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, wire.BackupHeader{Shard: 1, TokenEnd: half, Epoch: 1, Applied: 7}, true)
	})
	mux.HandleFunc("/v1/admin/backup/shards/2", second)
	serveNode(t, ln, mux)
	return "http://" + addr
}

// writeStream sends a backup stream of hdr with one key; without its end
// (the stream cut short) unless whole.
func writeStream(w http.ResponseWriter, hdr wire.BackupHeader, whole bool) {
	bw, err := wire.NewBackupWriter(w, hdr)
	if err != nil {
		return
	}
	_ = bw.Add([]byte{byte(hdr.Shard)}, 1, nil, []byte("v"))
	if whole {
		_ = bw.Close()
	}
	w.(http.Flusher).Flush()
}

var shard2 = wire.BackupHeader{Shard: 2, TokenStart: half, Epoch: 1, Applied: 9}

// entries lists dir's entries by name (none when dir does not exist).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func quickRetries(t *testing.T) {
	old := shardRetryWait
	shardRetryWait = 10 * time.Millisecond
	t.Cleanup(func() { shardRetryWait = old })
}

// A backup that fails midway (shard 1 written whole, shard 2's stream
// cut short at every attempt) leaves nothing where it was to be: no
// target, and no directory beside it; before, the target held shard
// files and no manifest. Into an existing empty target it leaves the
// target empty.
func TestFailedBackupLeavesNothing(t *testing.T) {
	quickRetries(t)
	url := twoShardNode(t, func(w http.ResponseWriter, r *http.Request) { writeStream(w, shard2, false) })
	for _, exists := range []bool{false, true} {
		parent, dir := backupTarget(t, exists)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := Backup(ctx, Config{Endpoint: url, Dir: dir, Parallel: 1})
		cancel()
		if err == nil {
			t.Fatalf("target existing %v: a backup whose shard 2 is always cut short succeeded", exists)
		}
		leftNothing(t, exists, parent, dir, "a failed backup")
	}
}

// A backup cancelled while a shard streams leaves nothing either; and
// while it runs, the target holds nothing that looks like a backup.
func TestCancelledBackupLeavesNothing(t *testing.T) {
	streaming := make(chan struct{}, 1)
	url := twoShardNode(t, func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, shard2, false)
		streaming <- struct{}{}
		<-r.Context().Done()
	})
	for _, exists := range []bool{false, true} {
		parent, dir := backupTarget(t, exists)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		done := make(chan error, 1)
		go func() {
			_, err := Backup(ctx, Config{Endpoint: url, Dir: dir, Parallel: 1})
			done <- err
		}()
		select {
		case <-streaming:
		case err := <-done:
			t.Fatalf("backup ended before shard 2 streamed: %v", err)
		}
		if got := entries(t, dir); slices.ContainsFunc(got, func(n string) bool { return !strings.HasPrefix(n, stagePrefix) }) {
			t.Errorf("target existing %v: while the backup runs, the target holds %q", exists, got)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("target existing %v: cancelled backup: %v, want context.Canceled", exists, err)
		}
		leftNothing(t, exists, parent, dir, "a cancelled backup")
	}
}

// A backup that succeeds is whole in its target, nothing else beside it,
// whether the target existed (empty) or not.
func TestBackupIsWholeInItsTarget(t *testing.T) {
	url := twoShardNode(t, func(w http.ResponseWriter, r *http.Request) { writeStream(w, shard2, true) })
	for _, exists := range []bool{false, true} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "b")
		if exists {
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		m, err := Backup(ctx, Config{Endpoint: url, Dir: dir})
		cancel()
		if err != nil {
			t.Fatalf("target existing %v: %v", exists, err)
		}
		if got := entries(t, parent); !slices.Equal(got, []string{"b"}) {
			t.Errorf("target existing %v: the target's parent holds %q, want the target only", exists, got)
		}
		if got, want := entries(t, dir), []string{manifestFile, "shard-1.cbk", "shard-2.cbk"}; !slices.Equal(got, want) {
			t.Errorf("target existing %v: the target holds %q, want %q", exists, got, want)
		}
		v, err := Verify(dir)
		if err != nil {
			t.Fatalf("target existing %v: %v", exists, err)
		}
		if len(v.Shards) != 2 || v.Keys() != 2 || m.Keys() != 2 {
			t.Errorf("target existing %v: manifest of %d shards, %d keys; want 2, 2", exists, len(v.Shards), v.Keys())
		}
		if fi, err := os.Stat(dir); exists && (err != nil || fi.Mode().Perm() != 0o750) {
			t.Errorf("the existing target's mode: %v %v, want it kept (0750)", fi.Mode(), err)
		}
	}
}

// A target that is not empty is refused before anything is fetched and
// left as it was; one that holds only a stopped backup's stage says so.
func TestBackupRefusesATargetInUse(t *testing.T) {
	url := twoShardNode(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("a shard was fetched for a target in use")
	})
	for _, held := range []string{"notes.txt", stagePrefix + "0123456789abcdef"} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, held), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Backup(context.Background(), Config{Endpoint: url, Dir: dir})
		if !errors.Is(err, ErrTargetInUse) || !strings.Contains(err.Error(), held) {
			t.Errorf("a target holding %s: %v, want ErrTargetInUse naming it", held, err)
		}
		if got := entries(t, dir); !slices.Equal(got, []string{held}) {
			t.Errorf("a refused target holds %q, want %q only", got, held)
		}
	}
}

// A target written to by someone else while the backup runs (made, or
// given a file) is not overwritten: the backup fails, its files are
// removed, the other's are kept.
func TestBackupDoesNotMixIntoATargetWrittenMeanwhile(t *testing.T) {
	streaming, resume := make(chan struct{}, 1), make(chan struct{})
	url := twoShardNode(t, func(w http.ResponseWriter, r *http.Request) {
		streaming <- struct{}{}
		<-resume
		writeStream(w, shard2, true)
	})
	for _, exists := range []bool{false, true} {
		parent, dir := backupTarget(t, exists)
		done := make(chan error, 1)
		go func() {
			_, err := Backup(context.Background(), Config{Endpoint: url, Dir: dir, Parallel: 1})
			done <- err
		}()
		<-streaming
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shard-1.cbk"), []byte("another's"), 0o644); err != nil {
			t.Fatal(err)
		}
		resume <- struct{}{}
		if err := <-done; !errors.Is(err, ErrTargetInUse) {
			t.Fatalf("target existing %v: backup into a target written meanwhile: %v, want ErrTargetInUse", exists, err)
		}
		if got := entries(t, parent); !slices.Equal(got, []string{"b"}) {
			t.Errorf("target existing %v: the parent holds %q, want the target only", exists, got)
		}
		if got := entries(t, dir); !slices.Equal(got, []string{"shard-1.cbk"}) {
			t.Errorf("target existing %v: the target holds %q, want the other's file only", exists, got)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "shard-1.cbk")); string(b) != "another's" {
			t.Errorf("target existing %v: the other's file was overwritten", exists)
		}
	}
}

// backupTarget makes a temporary parent and names the backup's target in it,
// "b", which exists (empty) if exists.
func backupTarget(t *testing.T, exists bool) (parent, dir string) {
	t.Helper()
	parent = t.TempDir()
	dir = filepath.Join(parent, "b")
	if exists {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return parent, dir
}

// leftNothing checks that after what (a backup that did not finish)
// parent holds the target only if it existed before, and that empty.
func leftNothing(t *testing.T, exists bool, parent, dir, what string) {
	t.Helper()
	want := []string(nil)
	if exists {
		want = []string{"b"}
	}
	if got := entries(t, parent); !slices.Equal(got, want) {
		t.Errorf("target existing %v: after %s, its parent holds %q, want %q", exists, what, got, want)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("target existing %v: after %s, the target holds %q", exists, what, got)
	}
}
