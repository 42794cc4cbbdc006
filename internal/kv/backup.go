package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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
	d, ok := c.cfg.Store.Descriptor(id)
	if !ok {
		if d, ok = c.cfg.Map.Get(id); !ok {
			return fmt.Errorf("%w: no shard %d", ErrInvalidArgument, id)
		}
	}
	r := c.cfg.Store.Replica(id)
	if r == nil {
		return fmt.Errorf("%w: shard %d (its replicas are on nodes %v)", ErrNoReplica, id, d.Replicas)
	}
	if err := c.backupReadIndex(ctx, r, id); err != nil {
		return err
	}
	_, err := r.WriteBackup(ctx, w, d.Epoch)
	return err
}

// backupReadWait bounds the wait for a backup's read index: through an
// election, not forever.
const backupReadWait = 30 * time.Second

// backupReadIndex waits until replica r has applied a read index of its
// shard, retrying while the shard has no leader (an election).
func (c *Coordinator) backupReadIndex(ctx context.Context, r *replica.Replica, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, backupReadWait)
	defer cancel()
	for {
		_, err := r.ReadIndexForward(ctx)
		var nl *replica.NotLeaderError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &nl):
			select { // no leader known yet: wait for the election
			case <-time.After(50 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		case !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return err
		}
		return fmt.Errorf("%w: no read index of shard %d within %v: %v", ErrTimeout, id, backupReadWait, err)
	}
}
