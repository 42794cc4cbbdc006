package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// splitNode is a fake one-node cluster whose shard 1 ([0, 2^64) at the
// backup's first reading of /v1/cluster) has split before its stream is
// taken: a split keeps the shard's id and narrows its range, so shard 1
// streams as [0, 2^63) and the upper half, with key "b", is shard 2^63.
// With learns, later readings of /v1/cluster list the upper half.
func splitNode(t *testing.T, learns bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	addr := ln.Addr().String()
	const mid = uint64(1) << 63
	var reads atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		shards := []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1}}
		if reads.Add(1) > 1 && learns {
			shards = []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "8000000000000000", Epoch: 2, Replicas: []uint64{1}, Leader: 1},
				{ID: mid, TokenStart: "8000000000000000", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1}}
		}
		_ = json.NewEncoder(w).Encode(client.ClusterInfo{NodeID: 1, Replication: 1,
			Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: addr, Reachable: true}}, Shards: shards})
	})
	stream := func(hdr wire.BackupHeader, key string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			bw, err := wire.NewBackupWriter(w, hdr)
			if err != nil {
				return
			}
			_ = bw.Add([]byte(key), 1, nil, []byte("v-"+key))
			_ = bw.Close()
		}
	}
	mux.HandleFunc("/v1/admin/backup/shards/1", stream(wire.BackupHeader{Shard: 1, TokenEnd: mid, Epoch: 2, Applied: 12}, "a"))
	mux.HandleFunc(fmt.Sprintf("/v1/admin/backup/shards/%d", mid), stream(wire.BackupHeader{Shard: mid, TokenStart: mid, Epoch: 1, Applied: 3}, "b"))
	serveNode(t, ln, mux)
	return addr
}

// A shard that splits during the backup: the backup reads the cluster
// again and fetches the new shard, so the shards fetched own the whole
// token ring and Verify accepts the result.
func TestBackupFetchesTheShardASplitMade(t *testing.T) {
	coverWait = 10 * time.Millisecond
	addr := splitNode(t, true)
	dir := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Backup(ctx, Config{Endpoint: "http://" + addr, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 2 || m.Keys() != 2 {
		t.Fatalf("backup of %d shards, %d keys; want both halves, 2 keys", len(m.Shards), m.Keys())
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}

// When the node asked never learns the new shard, the backup fails
// instead of leaving out the upper half's data.
func TestBackupWithAnUncoveredRangeFails(t *testing.T) {
	coverWait = 10 * time.Millisecond
	addr := splitNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Backup(ctx, Config{Endpoint: "http://" + addr, Dir: filepath.Join(t.TempDir(), "b")})
	if err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("backup with [2^63, 2^64) owned by no shard fetched: %v, want an incomplete-backup error", err)
	}
}

// Verify refuses a backup whose shards do not own the whole token ring
// (a shard file removed with its manifest entry) and one whose file holds
// another range than its manifest entry says.
func TestVerifyRefusesAGap(t *testing.T) {
	const mid = uint64(1) << 63
	write := func(dir string, sbs ...ShardBackup) {
		b, _ := json.Marshal(Manifest{Format: wire.BackupFormat, Endpoint: "x", Replication: 3, Shards: sbs})
		if err := writeFileSync(filepath.Join(dir, manifestFile), b); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	lower := writeShardFile(t, dir, wire.BackupHeader{Shard: 1, TokenEnd: mid, Epoch: 2, Applied: 5}, "a")
	upper := writeShardFile(t, dir, wire.BackupHeader{Shard: mid, TokenStart: mid, Epoch: 1, Applied: 5}, "b")
	write(dir, lower, upper)
	if _, err := Verify(dir); err != nil {
		t.Fatalf("a whole backup: %v", err)
	}
	write(dir, lower)
	if _, err := Verify(dir); err == nil {
		t.Fatalf("Verify accepted a backup covering tokens [0, %#x) only", mid)
	}
	wide := lower
	wide.TokenEnd = 0
	write(dir, wide)
	if _, err := Verify(dir); err == nil {
		t.Fatal("Verify accepted a manifest entry whose range differs from its file's")
	}
}

// writeShardFile writes a shard file with the given keys and returns its
// manifest entry, as fetchShard makes it.
func writeShardFile(t *testing.T, dir string, hdr wire.BackupHeader, keys ...string) ShardBackup {
	t.Helper()
	return writeShardFileWith(t, dir, hdr, keys, func(k string) string { return "v-" + k })
}

// writeShardFileWith is writeShardFile with value(k) the value of key k.
func writeShardFileWith(t *testing.T, dir string, hdr wire.BackupHeader, keys []string, value func(string) string) ShardBackup {
	t.Helper()
	var recs []wire.BackupRecord
	for _, k := range keys {
		recs = append(recs, wire.BackupRecord{Key: []byte(k), Version: 1, Data: []byte(value(k))})
	}
	return writeShardRecords(t, dir, hdr, recs)
}

// writeShardRecords writes a shard file of recs (in key order) into dir
// and returns its manifest entry.
func writeShardRecords(t *testing.T, dir string, hdr wire.BackupHeader, recs []wire.BackupRecord) ShardBackup {
	t.Helper()
	var buf bytes.Buffer
	bw, err := wire.NewBackupWriter(&buf, hdr)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := bw.Add(r.Key, r.Version, r.Terms, r.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	sb, err := readStream(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	sb.File = fmt.Sprintf("shard-%d.cbk", hdr.Shard)
	sum := sha256.Sum256(buf.Bytes())
	sb.Bytes, sb.SHA256 = int64(buf.Len()), hex.EncodeToString(sum[:])
	if err := writeFileSync(filepath.Join(dir, sb.File), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return sb
}
