package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
)

// MoveReplica replaces node from by node to in the shard (see
// store.Store.MoveReplica: learner, catch-up, one joint step) and returns
// the shard's descriptor afterwards. Any node may be asked: the store
// forwards to the shard's leader. Errors: ErrInvalidArgument (unknown
// shard or node, a change that cannot be made), ErrTimeout (ctx ended
// first; the move may be half done, and asking again finishes it).
func (c *Coordinator) MoveReplica(ctx context.Context, shardID, from, to uint64) (shard.Descriptor, error) {
	if !c.knowShard(ctx, shardID) {
		return shard.Descriptor{}, fmt.Errorf("%w: no shard %d", ErrInvalidArgument, shardID)
	}
	if from == 0 || to == 0 || from == to {
		return shard.Descriptor{}, fmt.Errorf("%w: move from node %d to node %d", ErrInvalidArgument, from, to)
	}
	err := c.cfg.Store.MoveReplica(ctx, shardID, from, to)
	switch {
	case err == nil:
		return c.descriptor(shardID), nil
	case errors.Is(err, store.ErrBadChange), errors.Is(err, transport.ErrUnknownPeer):
		return shard.Descriptor{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	case errors.Is(err, store.ErrNoLeader), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return shard.Descriptor{}, fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return shard.Descriptor{}, err
}

// SplitShard splits the shard at the midpoint of its token range (see
// store.Store.SplitShard) and returns the descriptors of its two halves:
// the shard itself, now owning the lower half, and the new shard owning
// the upper half, on the same replicas. Any node may be asked. Errors:
// ErrInvalidArgument (unknown shard, a range too narrow, a membership
// change in progress), ErrTimeout (ctx ended first: the split may have
// happened; the shard's descriptor tells).
func (c *Coordinator) SplitShard(ctx context.Context, shardID uint64) (lower, upper shard.Descriptor, err error) {
	if !c.knowShard(ctx, shardID) {
		return lower, upper, fmt.Errorf("%w: no shard %d", ErrInvalidArgument, shardID)
	}
	upper, err = c.cfg.Store.SplitShard(ctx, shardID)
	switch {
	case err == nil:
		return c.descriptor(shardID), upper, nil
	case errors.Is(err, store.ErrBadChange):
		return lower, upper, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	case errors.Is(err, store.ErrNoLeader), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return lower, upper, fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return lower, upper, err
}

// knowShard reports whether this node knows shard id, asking its peers
// for their replicas' descriptors when it does not (a shard a split made
// that this node, holding no replica of the old shard, has not heard of).
func (c *Coordinator) knowShard(ctx context.Context, id uint64) bool {
	if _, ok := c.cfg.Store.Descriptor(id); ok {
		return true
	}
	c.learnFromPeers(ctx)
	_, ok := c.cfg.Store.Descriptor(id)
	return ok
}
