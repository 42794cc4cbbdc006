package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// Meta is what Head reads of an object: everything but its value.
type Meta struct {
	Version uint64
	Size    int
	Index   []wire.IndexTerm
}

// Head reads key's version, value size and index terms without returning
// its value (HTTP HEAD). With values stored inline in the LSM, the engine
// still reads the block that holds the value, but nothing copies it and
// nothing crosses the network.
func (c *Coordinator) Head(ctx context.Context, key []byte, opts ReadOptions) (Meta, error) {
	ack, _, err := c.ackFrom(opts.Ack, opts.From)
	if err != nil {
		return Meta{}, err
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	d := c.route(key)
	q, err := c.admit(d.ID)
	if err != nil {
		return Meta{}, err
	}
	defer q.leave()
	req := &wire.Request{Kind: wire.KindHead, Sender: c.cfg.NodeID, ShardID: d.ID, Epoch: d.Epoch, Ack: uint32(ack), Key: key}
	var resp *wire.Response
	if opts.Consistency == Serializable || ack < c.majority() {
		// A replica not yet compared with its peers serves nothing (docs/scrub.md).
		r := c.cfg.Store.Replica(d.ID)
		local := r != nil && r.Verified()
		first := c.shortestQueue(d, local, time.Now())
		if local && first == c.cfg.NodeID {
			return c.headLocal(r, key)
		}
		resp, err = c.anyReplica(ctx, d, req, first)
	} else {
		req.Index = 1 // linearizable
		resp, err = c.onLeader(ctx, d, req)
	}
	if err != nil {
		return Meta{}, err
	}
	if err := statusErr(resp); err != nil {
		return Meta{}, err
	}
	return Meta{Version: resp.Version, Size: int(resp.Size), Index: resp.Terms}, nil
}

// execHead serves a KindHead request on the local replica r, after a read
// index when the request asks for a linearizable read.
func (c *Coordinator) execHead(ctx context.Context, r *replica.Replica, req *wire.Request) *wire.Response {
	if req.Index == 1 {
		if _, err := r.ReadIndex(ctx); err != nil {
			return errResponse(err)
		}
	}
	if err := r.WaitVerified(ctx); err != nil {
		return errResponse(err)
	}
	m, err := c.headLocal(r, req.Key)
	if errors.Is(err, statemachine.ErrWrongShard) {
		d := r.Desc()
		return c.ownerAnswer(c.refuse("key %q is outside shard %d's token range", truncKey(req.Key), d.ID), d, req.Key)
	}
	if err != nil {
		return errResponse(err)
	}
	return &wire.Response{Status: wire.StatusOK, Version: m.Version, Size: uint64(m.Size), Terms: m.Index}
}

// headLocal reads key's metadata from the engine (r: the local replica
// of its shard).
func (c *Coordinator) headLocal(r *replica.Replica, key []byte) (_ Meta, err error) {
	if !r.Desc().Contains(shard.Token(key)) {
		// The shard split since the request was routed (checked before
		// reading: the new shard's writes on this node may lag its
		// leader's).
		return Meta{}, fmt.Errorf("%w: shard %d", statemachine.ErrWrongShard, r.ID())
	}
	defer func() { err = stillMember(r, err) }()
	if c.cfg.Engine == nil {
		v, err := readLocal(r, key) // no engine: the value is read
		return Meta{Version: v.Version, Size: len(v.Data)}, err
	}
	m, err := c.cfg.Engine.HeadValue(storage.DataKey(shard.Token(key), key))
	if errors.Is(err, storage.ErrNotFound) {
		return Meta{}, ErrNotFound
	}
	if err != nil {
		return Meta{}, err
	}
	return Meta{Version: m.Version, Size: m.Size, Index: m.Terms}, nil
}

// stillMember turns the outcome of a read of the local replica r into
// replica.ErrStopped when r was removed from its shard by the time the
// read ended: the removal deletes the replica's data, so a read that ran
// alongside it may have found a key absent that is not (the caller
// retries on the shard's leader). The flag is set when the removal
// applies, before the data goes.
func stillMember(r *replica.Replica, err error) error {
	if r.Removed() {
		return replica.ErrStopped
	}
	return err
}

// readLocal reads key from the local replica r's applied state, with
// its index terms when the engine is at hand; replica.ErrStopped when r
// was removed meanwhile (stillMember).
func (c *Coordinator) readLocal(r *replica.Replica, key []byte) (v Value, err error) {
	if !r.Desc().Contains(shard.Token(key)) {
		// The shard split since the request was routed (see headLocal).
		return Value{}, fmt.Errorf("%w: shard %d", statemachine.ErrWrongShard, r.ID())
	}
	defer func() { err = stillMember(r, err) }()
	c.noteLocalRead(r)
	if c.cfg.Engine == nil {
		return readLocal(r, key)
	}
	applied := r.Applied() // before the read (readLocal)
	b, err := c.cfg.Engine.Get(storage.DataKey(shard.Token(key), key))
	if errors.Is(err, storage.ErrNotFound) {
		return Value{Revision: applied}, ErrNotFound
	}
	if err != nil {
		return Value{}, err
	}
	version, terms, data, err := storage.DecodeValueMeta(b)
	if err != nil {
		return Value{}, err
	}
	return Value{Data: data, Version: version, Index: terms, Revision: applied}, nil
}
