package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
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

// A replica that missed a split — its shard's log was truncated past the
// split while it was away, so it caught up by a snapshot of the narrowed
// shard — has no replica of the new shard, whose group then runs one
// member short: its messages for the new shard are dropped as for an
// unknown shard. The new shard's leader repairs it: a member that is
// reachable but has never answered (match 0, not recently active) for
// missingChecks checks in a row is asked to create an empty replica of
// the shard (wire.KindCreateReplica), which the leader then fills with a
// snapshot, as in a move. The member accepts only if no local replica
// overlaps the shard's range (its own copy of the old shard has passed
// the split, or it holds none): one that has not applied the split yet
// will create the replica itself when it does.

// missingChecks: orphan-collector rounds a member must stay silent
// before the leader asks it to create its replica.
const missingChecks = 3

// repairSplits runs one round of the repair above over the local leaders
// (silent counts rounds per shard and member).
func (s *Store) repairSplits(silent map[[2]uint64]int) {
	if s.tr == nil {
		return
	}
	seen := map[[2]uint64]bool{}
	for _, r := range s.replicaList() {
		if !r.IsLeader() || r.Removed() {
			continue
		}
		st := r.Status()
		d := r.Desc()
		for id, pr := range st.Progress {
			key := [2]uint64{r.ID(), id}
			if id == s.cfg.NodeID || pr.Match != 0 || pr.RecentActive || !d.HasReplica(id) || !s.tr.Reachable(id) {
				continue
			}
			seen[key] = true
			if silent[key]++; silent[key] < missingChecks {
				continue
			}
			silent[key] = 0
			ctx, cancel := context.WithTimeout(s.ctx, orphanAsk)
			req := &wire.Request{Kind: wire.KindCreateReplica, Sender: s.cfg.NodeID, ShardID: d.ID, Command: d.Marshal()}
			resp, err := s.tr.Request(ctx, id, req)
			cancel()
			if err == nil && resp.Status == wire.StatusOK {
				s.cfg.Logger.Info("asked a member without a replica of the shard to create one", "shard", d.ID, "node", id)
			}
		}
	}
	for key := range silent {
		if !seen[key] {
			delete(silent, key)
		}
	}
}

// overlapsLocked reports whether a local replica other than d's own
// shard's owns a token of d's range. Under s.mu.
func (s *Store) overlapsLocked(d shard.Descriptor) bool {
	for id, r := range s.mu.replicas {
		if id == d.ID {
			continue
		}
		o := r.Desc()
		if (d.End == 0 || o.Start < d.End) && (o.End == 0 || d.Start < o.End) {
			return true
		}
	}
	return false
}

// DefaultSplitSize is Config.SplitSize's default: 256 MiB.
const DefaultSplitSize = 256 << 20

// splitter checks, every SplitCheckInterval, the on-disk size of the data
// of each shard this node leads and how fast its log grows, and splits
// one that passed SplitSize or whose write load stayed above SplitLoad
// for SplitLoadChecks checks (one split per shard and round; a half
// still too large or too hot splits again on a later round).
func (s *Store) splitter() {
	t := time.NewTicker(s.cfg.SplitCheckInterval)
	defer t.Stop()
	loads := map[uint64]*writeLoad{}
	for {
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		now := time.Now()
		led := map[uint64]bool{}
		for _, r := range s.replicaList() {
			if !r.IsLeader() || r.Removed() {
				continue
			}
			d := r.Desc()
			led[d.ID] = true
			wl := loads[d.ID]
			if wl == nil {
				wl = &writeLoad{}
				loads[d.ID] = wl
			}
			rate := wl.observe(r.Status().Commit, now, s.cfg.SplitLoad)
			if _, ok := d.SplitPoint(); !ok {
				continue
			}
			var why []any
			if s.cfg.SplitSize > 0 {
				start, end := storage.DataSpan(d.Start, d.End)
				if size, err := s.cfg.Engine.EstimateSize(start, end); err == nil && size > uint64(s.cfg.SplitSize) {
					why = []any{"bytes", size, "split_size", s.cfg.SplitSize}
				}
			}
			if why == nil && s.cfg.SplitLoad > 0 && wl.hot >= s.cfg.SplitLoadChecks {
				why = []any{"entries_per_sec", int64(rate), "split_load", s.cfg.SplitLoad, "checks", wl.hot}
			}
			if why == nil {
				continue
			}
			s.cfg.Logger.Info("shard passed the split size or load: splitting it", append([]any{"shard", d.ID}, why...)...)
			ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
			_, err := s.runSplit(ctx, d.ID)
			cancel()
			if err != nil {
				s.cfg.Logger.Warn("automatic split", "shard", d.ID, "err", err)
			}
			delete(loads, d.ID) // its half starts a new count
		}
		for id := range loads {
			if !led[id] {
				delete(loads, id) // a leadership lost: its count starts again when it comes back
			}
		}
	}
}

// writeLoad is how fast a led shard's log grows, from one check to the
// next, and how many checks in a row found it above the split load.
type writeLoad struct {
	index uint64
	at    time.Time
	hot   int
}

// observe records the shard's commit index at now and returns the
// entries per second since the last observation (0 at the first); hot
// counts the observations in a row above limit (limit 0: never).
func (w *writeLoad) observe(commit uint64, now time.Time, limit float64) float64 {
	first := w.at.IsZero()
	prev, at := w.index, w.at
	w.index, w.at = commit, now
	if first || !now.After(at) || commit < prev {
		w.hot = 0
		return 0
	}
	rate := float64(commit-prev) / now.Sub(at).Seconds()
	if limit > 0 && rate > limit {
		w.hot++
	} else {
		w.hot = 0
	}
	return rate
}
