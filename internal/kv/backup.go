package kv

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-db/cairn/internal/replica"
)

// ErrNoReplica: this node holds no replica of the shard a request names.
// HTTP 404.
var ErrNoReplica = errors.New("kv: this node holds no replica of the shard")

// Backup writes shard id's data to w as a wire backup stream, from this
// node's replica, after a read index: every write acknowledged before the
// call is in it. The replica may be a follower (the read index is asked of
// the leader inside the Raft stream).
func (c *Coordinator) Backup(ctx context.Context, id uint64, w io.Writer) error {
	d, ok := c.cfg.Map.Get(id)
	if !ok {
		return fmt.Errorf("%w: no shard %d", ErrInvalidArgument, id)
	}
	r := c.cfg.Store.Replica(id)
	if r == nil {
		return fmt.Errorf("%w: shard %d (its replicas are on nodes %v)", ErrNoReplica, id, d.Replicas)
	}
	if _, err := r.ReadIndexForward(ctx); err != nil {
		var nl *replica.NotLeaderError
		if errors.As(err, &nl) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: read index of shard %d: %v", ErrTimeout, id, err)
		}
		return err
	}
	_, err := r.WriteBackup(ctx, w, d.Epoch)
	return err
}
