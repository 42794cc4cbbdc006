package kv_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// keyOf returns a key owned by shard id.
func keyOf(m shard.Map, id uint64, prefix string) []byte {
	for i := 0; ; i++ {
		k := []byte(fmt.Sprint(prefix, i))
		if m.ForKey(k).ID == id {
			return k
		}
	}
}

func writeReq(shardID, epoch uint64, key, cmdKey []byte) *wire.Request {
	cmd := wire.Command{RequestID: []byte(fmt.Sprint("id-", string(cmdKey), epoch)),
		Op: wire.OpPut, Key: cmdKey, Value: []byte("intruder")}
	return &wire.Request{Kind: wire.KindWrite, Sender: 2, ShardID: shardID, Epoch: epoch, Key: key, Command: cmd.Marshal()}
}

// A forwarded request (the peer Request RPC) naming shard 1 for a key of
// shard 3 used to be applied by shard 1's replicas, which then held a key
// they do not own. It is refused with StatusWrongShard and nothing is
// applied; so is a request carrying another descriptor epoch.
func TestForwardedRequestOutsideShardIsRefused(t *testing.T) {
	c := newCluster(t, 3, 3, replica.Config{})
	in := keyOf(c.m, 1, "in")
	out := keyOf(c.m, 3, "out")
	eventually(t, 5*time.Second, func() error {
		if leaderOf(c, 1) == 0 {
			return errors.New("no leader of shard 1")
		}
		return nil
	})
	lead := c.nodes[leaderOf(c, 1)]
	for name, req := range map[string]*wire.Request{
		"key of shard 3":               writeReq(1, 1, out, out),
		"key of shard 3 without epoch": writeReq(1, 0, out, out),
		"command key of shard 3":       writeReq(1, 1, in, out),
		"stale epoch":                  writeReq(1, 2, in, in),
		"serializable read of shard 3": {Kind: wire.KindReadLocal, ShardID: 1, Epoch: 1, Key: out},
		"linearizable read of shard 3": {Kind: wire.KindRead, ShardID: 1, Epoch: 1, Key: out},
		"serializable read, old epoch": {Kind: wire.KindReadLocal, ShardID: 1, Epoch: 9, Key: in},
	} {
		before := lead.coord.Refused()
		resp := lead.coord.HandleRequest(ctx5(t), req)
		if resp.Status != wire.StatusWrongShard {
			t.Fatalf("%s: status %d (%s), want StatusWrongShard", name, resp.Status, resp.Message)
		}
		if lead.coord.Refused() != before+1 {
			t.Fatalf("%s: refusal not counted", name)
		}
	}
	// A request without an epoch (an older node) for a key it owns is
	// served; once it is applied everywhere, no replica holds the
	// refused key or value.
	if resp := lead.coord.HandleRequest(ctx5(t), writeReq(1, 0, in, in)); resp.Status != wire.StatusOK {
		t.Fatalf("in-range write: status %d %s", resp.Status, resp.Message)
	}
	applied := lead.st.Replica(1).Applied()
	for _, n := range c.nodes {
		eventually(t, 5*time.Second, func() error {
			if a := n.st.Replica(1).Applied(); a < applied {
				return fmt.Errorf("node %d applied %d < %d", n.id, a, applied)
			}
			return nil
		})
		if _, err := n.eng.Get(storage.DataKey(shard.Token(out), out)); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("node %d holds the refused key of shard 3: %v", n.id, err)
		}
		if v, err := n.eng.Get(storage.DataKey(shard.Token(in), in)); err != nil || string(v[8:]) != "intruder" {
			t.Fatalf("node %d: in-range key %q %v", n.id, v, err)
		}
	}
}

// A coordinator whose view of a shard disagrees with the shard's
// replicas (another epoch, as during a move) is refused with the
// replica's descriptor, adopts it and retries: the write succeeds, and
// the refusal was counted.
func TestCoordinatorRefreshesStaleDescriptor(t *testing.T) {
	// Node 4 holds no replica of shard 1: its requests go over the wire.
	c := newCluster(t, 4, 4, replica.Config{})
	peers := map[uint64]string{1: "mem-1", 2: "mem-2", 3: "mem-3", 4: "mem-4"}
	tr := c.net.Join(9, &adapter{}, nil)
	st := c.nodes[4].st
	coord := mustCoordinator(t, kv.Config{NodeID: 4, Peers: peers, Replication: 3, Map: c.m, Store: st,
		Transport: tr, DefaultTimeout: 5 * time.Second})
	if st.Replica(1) != nil {
		t.Fatal("node 4 holds shard 1")
	}
	wrong, _ := st.Descriptor(1)
	wrong = wrong.Clone()
	wrong.Epoch = 7
	if !st.LearnDescriptor(wrong) {
		t.Fatal("descriptor of a newer epoch not learned")
	}
	var before uint64
	for _, n := range c.nodes {
		before += n.coord.Refused()
	}
	k := keyOf(c.m, 1, "k")
	if _, _, err := coord.Put(ctx5(t), k, []byte("v"), kv.WriteOptions{}); err != nil {
		t.Fatalf("put with a stale descriptor: %v", err)
	}
	// A serializable read, served by any replica, is re-addressed alike
	// (the adopted descriptor is older than what node 4 learned, so it
	// is not remembered: the read meets the refusal again).
	eventually(t, 5*time.Second, func() error {
		v, err := coord.Get(ctx5(t), k, kv.ReadOptions{Consistency: kv.Serializable})
		if err != nil || string(v.Data) != "v" {
			return fmt.Errorf("serializable read with a stale descriptor: %q %v", v.Data, err)
		}
		return nil
	})
	var after uint64
	for _, n := range c.nodes {
		after += n.coord.Refused()
	}
	if after <= before {
		t.Fatal("no replica refused the stale epoch: the test proves nothing")
	}
}
