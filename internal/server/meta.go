package server

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
)

// identity is what a node persists on first start; on restart it wins over
// conflicting bootstrap flags.
type identity struct {
	NodeID      uint64            `json:"node_id"`
	Replication int               `json:"replication"`
	Peers       map[uint64]string `json:"peers"`
	// HTTPAddrs are the other members' client addresses as last read
	// from the membership record (or the join answer), so that a node
	// restarted before its own read of the record succeeds — one whose
	// replicas were replaced while it was down — can read it through
	// another member and learn it was removed.
	HTTPAddrs map[uint64]string `json:"http_addrs,omitempty"`
	Map       shard.Map         `json:"map"`
	// Joined: the node joined a running cluster (--join) rather than
	// bootstrapping one; it never writes the membership record from its
	// peers.
	Joined bool `json:"joined,omitempty"`
	// Removed: the cluster removed this node (decommissioned or declared
	// dead); it refuses to start.
	Removed bool `json:"removed,omitempty"`
}

var metaKey = storage.MetaKey("identity")

func loadIdentity(eng *storage.Engine) (identity, bool, error) {
	var id identity
	b, err := eng.Get(metaKey)
	if errors.Is(err, storage.ErrNotFound) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, false, fmt.Errorf("%w: identity: %v", storage.ErrCorrupt, err)
	}
	return id, true, nil
}

func saveIdentity(eng *storage.Engine, id identity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	batch := eng.NewBatch()
	batch.Set(metaKey, b)
	return batch.Commit(true)
}
