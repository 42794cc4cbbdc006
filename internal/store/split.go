package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
)

// SplitShard splits the shard at the midpoint of its token range
// (docs/split.md): one entry in the shard's log, applied by every
// replica, after which the shard owns the lower half and a new shard, on
// the same replicas, the upper half. It returns the new shard's
// descriptor once the shard's leader has applied the split. Any node may
// call it: the change runs on the shard's leader (wire.KindMembers), as
// moves do. Each call splits once more: a call that timed out may have
// split the shard (its descriptor tells). Errors: ErrBadChange (unknown
// shard, a range too narrow, a membership change in progress; not
// retried), ErrNoLeader, the context's error.
func (s *Store) SplitShard(ctx context.Context, shardID uint64) (shard.Descriptor, error) {
	return s.change(ctx, MemberChange{Kind: ChangeSplit, Shard: shardID})
}

// runSplit proposes the split on the local replica while it leads the
// shard and waits until it has applied it.
func (s *Store) runSplit(ctx context.Context, shardID uint64) (shard.Descriptor, error) {
	for {
		r := s.replica(shardID)
		if r == nil {
			var hint uint64
			if d, ok := s.Descriptor(shardID); ok && len(d.Replicas) > 0 {
				hint = d.Replicas[0]
			}
			return shard.Descriptor{}, &replica.NotLeaderError{Leader: hint}
		}
		changed := r.DescChanged()
		d := r.Desc()
		child, err := r.ProposeSplit(ctx, d.Epoch)
		switch {
		case errors.Is(err, replica.ErrCannotSplit):
			return shard.Descriptor{}, fmt.Errorf("%w: %v", ErrBadChange, err)
		case errors.Is(err, replica.ErrStaleEpoch):
			continue
		case err != nil:
			return shard.Descriptor{}, err
		}
		s.cfg.Logger.Info("split proposed", "shard", shardID, "epoch", d.Epoch, "new_shard", child)
		// Wait for the descriptor to change: the split applied (the range
		// ends at child), or something else did, or the entry was lost in
		// a leader change. Then look again: a split proposed twice applies
		// once (the second names an epoch that is gone).
		select {
		case <-changed:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return shard.Descriptor{}, ctx.Err()
		}
		nd := r.Desc()
		if nd.Start == d.Start && nd.End == d.End {
			continue
		}
		// The range changed: by this split, or by an earlier one whose
		// entry applied first; the shard that owns the upper part now.
		if c, ok := s.Descriptor(nd.End); ok && nd.End != 0 {
			return c, nil
		}
		return shard.Descriptor{}, fmt.Errorf("%w: shard %d changed range under the split", ErrBadChange, shardID)
	}
}

// marshalSplitResult packs the shard's and the new shard's descriptors
// into one answer.
func marshalSplitResult(parent, child []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(parent)))
	b = append(b, parent...)
	return append(b, child...)
}

func unmarshalSplitResult(b []byte) (parent, child []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, errors.New("store: malformed split answer")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
