package kv

import (
	"context"
	"sort"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// Routing follows the shards' live descriptors, which the store keeps
// (store.Descriptors, store.Route): a local replica's own descriptor,
// which follows every membership change and split it applies, or the
// latest one the node saw. A split changes ranges: a node that holds no
// replica of a shard that split learns the new halves when a replica
// refuses a request (a wrong-shard answer carries the descriptor of the
// shard that owns the key in the refusing node's view) or from its
// peers' node info.

// route returns the current descriptor of the shard owning key.
func (c *Coordinator) route(key []byte) shard.Descriptor {
	if d, ok := c.cfg.Store.Route(shard.Token(key)); ok {
		return d
	}
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

// maxRefreshes bounds how often one request adopts a newer descriptor
// (a replica's answer, or the node's own view after a split) before it
// reports ErrWrongShard.
const maxRefreshes = 16

// ownerAnswer is the wrong-shard answer for a key the replica's shard
// does not own (any more): it names the shard that owns it in this
// node's view, so the coordinator that asked learns the split.
func (c *Coordinator) ownerAnswer(resp *wire.Response, d shard.Descriptor, key []byte) *wire.Response {
	if o := c.route(key); o.ID != 0 && o.ID != d.ID && o.Contains(shard.Token(key)) {
		resp.Value = o.Marshal()
	}
	return resp
}

// refreshRoute handles a StatusWrongShard answer. It learns the
// descriptor the answer carries (the refusing replica's own, when the
// request named another epoch: the shard's members changed; or the
// owner's, when the shard no longer owns the key: it split), then routes
// the request again by its key. It returns true, with d and req
// re-addressed, when that gives another shard or epoch, so the caller
// retries at once; false when it knows nothing newer.
func (c *Coordinator) refreshRoute(d *shard.Descriptor, req *wire.Request, resp *wire.Response) bool {
	if nd, err := shard.UnmarshalDescriptor(resp.Value); err == nil && len(nd.Replicas) > 0 {
		c.cfg.Store.LearnDescriptor(nd)
		if nd.ID == d.ID && nd.Start == d.Start && nd.End == d.End && nd.Epoch != d.Epoch {
			// The members changed (a move), not the range: the answer's
			// descriptor is the current one even if it is older than
			// what this node knew.
			*d = nd
			req.Epoch = nd.Epoch
			return true
		}
	}
	key := req.Key
	if req.Kind == wire.KindWrite && req.Decoded != nil {
		key = req.Decoded.Key
	}
	if key == nil {
		return false
	}
	nd := c.route(key)
	if nd.ID == 0 || (nd.ID == d.ID && nd.Epoch == d.Epoch && nd.Start == d.Start && nd.End == d.End) {
		return false
	}
	*d = nd
	req.ShardID, req.Epoch = nd.ID, nd.Epoch
	return true
}

// shardViews is every shard's current descriptor, by shard id: the
// shards that own the ring in this node's view.
func (c *Coordinator) shardViews() []shard.Descriptor {
	ds := c.cfg.Store.Cover()
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
	return ds
}

// learnDescriptors records the descriptors another node reported
// (wire.NodeInfo) where they are newer than this node's view.
func (c *Coordinator) learnDescriptors(raw [][]byte) {
	for _, b := range raw {
		if d, err := shard.UnmarshalDescriptor(b); err == nil {
			c.cfg.Store.LearnDescriptor(d)
		}
	}
}

// learnFromPeers asks the peers for their replicas' descriptors and
// learns those newer than this node's view (a shard a split made that
// this node, holding no replica of the old shard, has not heard of).
func (c *Coordinator) learnFromPeers(ctx context.Context) {
	for _, v := range c.askPeers(ctx) {
		c.learnDescriptors(v.Descriptors)
	}
}
