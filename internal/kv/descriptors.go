package kv

import (
	"sort"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// Routing follows the shards' live descriptors, which the store keeps
// (store.Descriptors): a local replica's own descriptor, which follows
// every membership change it applies, or the latest one the node saw.
// The token ranges come from the map: moves change members, not ranges.

// route returns the current descriptor of the shard owning key.
func (c *Coordinator) route(key []byte) shard.Descriptor {
	return c.descriptor(c.cfg.Map.ForKey(key).ID)
}

// descriptor returns the current descriptor of shard id (the map's when
// the store knows none).
func (c *Coordinator) descriptor(id uint64) shard.Descriptor {
	if d, ok := c.cfg.Store.Descriptor(id); ok {
		return d
	}
	d, _ := c.cfg.Map.Get(id)
	return d
}

// maxRefreshes bounds how often one request adopts the descriptor a
// refusing replica sent back before it reports ErrWrongShard.
const maxRefreshes = 4

// refreshRoute handles a StatusWrongShard answer: when it carries the
// replica's descriptor of the same shard and token range (the request
// named another epoch: the shard's members changed under it), the
// request is re-addressed to that descriptor — its epoch and members —
// and true is returned, so the caller retries on the shard's leader. The
// descriptor is remembered when it is newer than what the node knew.
func (c *Coordinator) refreshRoute(d *shard.Descriptor, req *wire.Request, resp *wire.Response) bool {
	nd, err := shard.UnmarshalDescriptor(resp.Value)
	if err != nil || nd.ID != d.ID || nd.Start != d.Start || nd.End != d.End || len(nd.Replicas) == 0 {
		return false
	}
	c.cfg.Store.LearnDescriptor(nd)
	*d = nd
	req.Epoch = nd.Epoch
	return true
}

// shardViews is every shard's current descriptor, by shard id: the
// store's view, falling back on the map for shards it does not know.
func (c *Coordinator) shardViews() []shard.Descriptor {
	ds := c.cfg.Store.Descriptors()
	seen := map[uint64]bool{}
	for _, d := range ds {
		seen[d.ID] = true
	}
	for _, d := range c.cfg.Map.Shards {
		if !seen[d.ID] {
			ds = append(ds, d)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
	return ds
}

// learnDescriptors records the descriptors another node reported
// (wire.NodeInfo) where they are newer than this node's view.
func (c *Coordinator) learnDescriptors(raw [][]byte) {
	for _, b := range raw {
		if d, err := shard.UnmarshalDescriptor(b); err == nil {
			if m, ok := c.cfg.Map.Get(d.ID); ok && m.Start == d.Start && m.End == d.End {
				c.cfg.Store.LearnDescriptor(d)
			}
		}
	}
}
