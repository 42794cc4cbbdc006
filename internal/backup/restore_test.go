package backup

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// target is a fake cluster to restore into: it keeps what is put.
type target struct {
	mu   sync.Mutex
	kv   map[string]string
	puts map[string]int
}

func newTarget(t *testing.T) (*target, string) {
	tg := &target{kv: map[string]string{}, puts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/kv" && r.Method == http.MethodGet {
			tg.mu.Lock()
			var ents []map[string]any
			for k, v := range tg.kv {
				ents = append(ents, map[string]any{"key": k, "version": 1, "value": []byte(v)})
			}
			tg.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"entries": ents})
			return
		}
		k, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/v1/kv/"))
		if err != nil || r.Method != http.MethodPut {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		buf, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		tg.kv[k] = string(buf)
		tg.puts[k]++
		tg.mu.Unlock()
		w.Header().Set("ETag", `"1"`)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return tg, srv.URL
}

// keyIn returns a key with prefix p whose token lies in [start, end)
// (end 0: 2^64).
func keyIn(p string, start, end uint64) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", p, i)
		if tok := shard.Token([]byte(k)); tok >= start && (end == 0 || tok < end) {
			return k
		}
	}
}

// writeManifest writes dir's manifest.json naming sbs.
func writeManifest(t *testing.T, dir string, sbs ...ShardBackup) {
	t.Helper()
	b, _ := json.Marshal(Manifest{Format: wire.BackupFormat, Endpoint: "x", Replication: 3, Shards: sbs})
	if err := writeFileSync(filepath.Join(dir, manifestFile), b); err != nil {
		t.Fatal(err)
	}
}

// A backup taken while shards split can hold a shard fetched before its
// split (its whole old range) and the new shard of the split fetched
// after it: their ranges overlap, and the new shard's data is the later.
// Restore takes the overlapped range from the later shard only: a key it
// no longer holds (deleted in between) stays deleted, and a key both hold
// gets the later value.
func TestRestoreTakesAnOverlappedRangeFromTheLaterShard(t *testing.T) {
	const mid = uint64(1) << 63
	low, kept, gone := keyIn("low-", 0, mid), keyIn("kept-", mid, 0), keyIn("gone-", mid, 0)
	dir := t.TempDir()
	// Shard 1 streamed [0, 2^64) before it split; shard mid streamed the
	// upper half after kept was rewritten and gone deleted.
	wide := writeShardFileValues(t, dir, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 5},
		map[string]string{low: "low", kept: "old", gone: "gone"})
	upper := writeShardFileValues(t, dir, wire.BackupHeader{Shard: mid, TokenStart: mid, Epoch: 1, Applied: 9},
		map[string]string{kept: "new"})
	writeManifest(t, dir, wide, upper)
	tg, url := newTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	if tg.kv[low] != "low" || tg.kv[kept] != "new" || tg.puts[kept] != 1 {
		t.Errorf("after restore: %s=%q %s=%q (%d puts), want low and new (one put)", low, tg.kv[low], kept, tg.kv[kept], tg.puts[kept])
	}
	if v, ok := tg.kv[gone]; ok {
		t.Errorf("%s restored (%q): the later shard's data of the overlapped range does not hold it", gone, v)
	}
	if st.Keys != 2 {
		t.Errorf("restored %d keys, want 2", st.Keys)
	}
}

// writeShardFileValues is writeShardFile with values of one's own.
func writeShardFileValues(t *testing.T, dir string, hdr wire.BackupHeader, kv map[string]string) ShardBackup {
	t.Helper()
	var keys []string
	for k := range kv {
		keys = append(keys, k)
	}
	// In storage order, as a node streams them.
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(shard.Token([]byte(a)), shard.Token([]byte(b))) })
	return writeShardFileWith(t, dir, hdr, keys, func(k string) string { return kv[k] })
}

// Two shard files whose ranges overlap without nesting come from no one
// cluster's splits: Verify refuses them.
func TestVerifyRefusesRangesNoSplitMakes(t *testing.T) {
	const mid = uint64(1) << 63
	dir := t.TempDir()
	a := writeShardFile(t, dir, wire.BackupHeader{Shard: 1, TokenEnd: mid + 1<<40, Epoch: 1, Applied: 5}, "a")
	b := writeShardFile(t, dir, wire.BackupHeader{Shard: mid, TokenStart: mid, Epoch: 1, Applied: 5}, "b")
	writeManifest(t, dir, a, b)
	if _, err := Verify(dir); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("Verify of ranges [0, %#x) and [%#x, 2^64): %v, want ErrBadBackup", mid+1<<40, mid, err)
	}
}

// An etcd key beginning with byte 0x00 is stored under 0x00 0xFF: it is
// user data, not one of Cairn's own records, and the HTTP API restore
// writes through refuses it. Restore refuses such a backup before writing
// anything rather than drop those keys as Cairn's records; told to skip
// them, it restores the rest and counts them apart.
func TestRestoreDoesNotDropEtcdKeysAsCairnRecords(t *testing.T) {
	dir := t.TempDir()
	all := writeShardFile(t, dir, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 5}, "a", "\x00\xff\x00\x01", "\x00sys/members")
	writeManifest(t, dir, all)
	tg, url := newTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}})
	if !errors.Is(err, ErrUnrestorable) || len(tg.kv) != 0 {
		t.Fatalf("restore of a backup with an etcd key beginning with 0x00: %v, %+v, %d keys written; want ErrUnrestorable before any write", err, st, len(tg.kv))
	}
	st, err = Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}, SkipEtcdZeroKeys: true})
	if err != nil || st.Keys != 1 || st.Reserved != 1 || st.EtcdZeroKeys != 1 || tg.kv["a"] != "v-a" {
		t.Fatalf("restore skipping them: %v, %+v, %v; want a restored, one record and one etcd key skipped", err, st, tg.kv)
	}
}

// A target that already holds keys is refused before anything is
// written (a restore would overwrite them with the backup's older values
// and leave the others next to them), unless told to write into it.
func TestRestoreRefusesATargetWithKeys(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, writeShardFile(t, dir, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 5}, "a", "b"))
	tg, url := newTarget(t)
	tg.kv["a"] = "newer"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}}); !errors.Is(err, ErrTargetNotEmpty) || tg.kv["a"] != "newer" || len(tg.kv) != 1 {
		t.Fatalf("restore into a target holding a key: %v, target %v; want ErrTargetNotEmpty and nothing written", err, tg.kv)
	}
	if st, err := Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}, IntoNonEmpty: true}); err != nil || st.Keys != 2 || tg.kv["a"] != "v-a" {
		t.Fatalf("restore told to write into it: %v, %+v, target %v", err, st, tg.kv)
	}
}

// A key put with an etcd lease is not restored: its lease is the source
// cluster's record, which restore does not write, and restored with the
// lease's id it would never expire. The other keys are, and the skipped
// ones are counted.
func TestRestoreSkipsKeysOfEtcdLeases(t *testing.T) {
	dir := t.TempDir()
	lease := []wire.IndexTerm{{Name: wire.EtcdLeaseIndex, Term: wire.EncodeIntTerm(7)}}
	other := []wire.IndexTerm{{Name: "email_bin", Term: []byte("a@b")}}
	writeManifest(t, dir, writeShardRecords(t, dir, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 5}, []wire.BackupRecord{
		{Key: []byte("indexed"), Version: 1, Terms: other, Data: []byte("i")},
		{Key: []byte("lock"), Version: 2, Terms: lease, Data: []byte("held")},
		{Key: []byte("plain"), Version: 3, Data: []byte("p")},
	}))
	tg, url := newTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := Restore(ctx, RestoreConfig{Dir: dir, Endpoints: []string{url}})
	if err != nil || st.Keys != 2 || st.Leased != 1 || tg.kv["plain"] != "p" || tg.kv["indexed"] != "i" {
		t.Fatalf("restore: %v, %+v, target %v; want plain and indexed restored, one leased key skipped", err, st, tg.kv)
	}
	if _, ok := tg.kv["lock"]; ok {
		t.Fatal("a key of an etcd lease was restored")
	}
}
