package store

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// infoTransport answers every KindNodeInfo with fixed descriptors.
type infoTransport struct{ descs [][]byte }

func (f *infoTransport) Send(uint64, []transport.Envelope) {}
func (f *infoTransport) SendSnapshot(context.Context, uint64, transport.Envelope, transport.SnapshotReader) error {
	return nil
}
func (f *infoTransport) Request(_ context.Context, _ uint64, req *wire.Request) (*wire.Response, error) {
	info := wire.NodeInfo{Descriptors: f.descs}
	return &wire.Response{Status: wire.StatusOK, Value: info.Marshal()}, nil
}
func (f *infoTransport) Reachable(uint64) bool { return true }
func (f *infoTransport) Close() error          { return nil }

// Node 3 was down while shard 1 split and its replica of the lower half
// was then moved away (3 -> 4). Its members now describe shard 1 at a
// higher epoch, without node 3, over the lower half only. The orphan
// collector must recognise the removal although the range differs, and
// remove the orphan over its whole old range: while it stays, node 3
// refuses to create any replica overlapping it (the split's upper half,
// which the repair of splits asks for, or a later move).
func TestOrphanRemovedAfterASplitIsCollected(t *testing.T) {
	m, err := shard.Bootstrap([]uint64{1, 2, 3}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := storage.Open(t.TempDir(), storage.Options{CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := New(Config{NodeID: 3, Engine: eng, Map: m, Logger: quiet}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	r := s.Replica(1)
	if r == nil {
		t.Fatal("node 3 has no replica of shard 1")
	}
	old := r.Desc()
	// What the members applied while node 3 was away: the split (both
	// halves keep members 1, 2, 3), then a move of the lower half's
	// replica from node 3 to node 4 (learner added, joint, left).
	mid, ok := old.SplitPoint()
	if !ok {
		t.Fatal("no split point")
	}
	lower, upper := old.Halves(mid)
	lower.Epoch += 3
	lower.Replicas = []uint64{1, 2, 4}
	s.SetTransport(&infoTransport{descs: [][]byte{lower.Marshal(), upper.Marshal()}})

	d, removed := s.removedBy(old)
	if !removed {
		t.Errorf("members hold shard %d at epoch %d without node 3 (range [%#x,%#x)); the orphan at epoch %d [%#x,%#x) is not recognised as removed",
			lower.ID, lower.Epoch, lower.Start, lower.End, old.Epoch, old.Start, old.End)
	} else if err := s.removeLocal(d); err != nil {
		t.Fatal(err)
	}
	// The upper half still lists node 3: its leader's split repair asks
	// node 3 to create its replica, which must succeed once the orphan
	// is gone; while the orphan stays it is refused at every attempt.
	if err := s.CreateReplica(upper); err != nil {
		t.Errorf("CreateReplica of shard %d (upper half, members %v) on node 3: %v", upper.ID, upper.Replicas, err)
	}
}
