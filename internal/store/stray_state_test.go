package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
)

// Raft state of a shard with no stored descriptor, which the bootstrap
// map does not place on the node (a half-written or foreign state), has
// no known range: the zero descriptor's range, tokens [0, 2^64), is the
// node's whole data space. Reopening the store deletes that shard's own
// state and must leave the data of the node's other shards alone.
func TestStateWithoutDescriptorKeepsOtherShardsData(t *testing.T) {
	n := newCrashNode(t)
	if n.st.Replica(1) == nil {
		t.Fatal("node 3 has no replica of shard 1")
	}
	const stray = 7
	b := n.eng.NewBatch()
	var keys [][]byte
	for i := range 10 {
		k := []byte(fmt.Sprint("k", i))
		keys = append(keys, k)
		b.Set(storage.DataKey(shard.Token(k), k), storage.EncodeValue(6, k))
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := raftlog.Bootstrap(n.eng, stray, []uint64{3}); err != nil {
		t.Fatal(err)
	}

	eng, err := storage.Open("/data", crashEngineOptions(n.fs.CrashClone(0, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := New(Config{NodeID: 3, Engine: eng, Map: n.m, Logger: lg}, false)
	if err != nil {
		t.Fatalf("the node does not start: %v", err)
	}
	defer st.Stop()

	for _, k := range keys {
		if _, err := eng.Get(storage.DataKey(shard.Token(k), k)); err != nil {
			t.Errorf("shard 1's key %q after the restart: %v", k, err)
		}
	}
	if st.Replica(1) == nil {
		t.Error("shard 1's replica did not open")
	}
	if st.Replica(stray) != nil {
		t.Errorf("shard %d, without descriptor and not placed here, was opened", stray)
	}
	if has, err := raftlog.Exists(eng, stray); err != nil || has {
		t.Errorf("shard %d's raft state after the restart: present %v (%v)", stray, has, err)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("shard=%d", stray)) {
		t.Errorf("no warning names shard %d; logs:\n%s", stray, logs.String())
	}
}
