package store

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// A replica removed from its shard while its node was down (a move whose
// source was dead) never applies its removal: the members no longer send
// it the log. It sits without a leader, its messages refused by the
// members. The orphan collector finds such replicas: one that has known
// no leader for two checks in a row asks the other members of its
// descriptor for their descriptors (wire.KindNodeInfo); a descriptor of
// a higher epoch that no longer lists this node proves the removal was
// committed (a replica's descriptor only follows applied, so committed,
// conf changes), and the replica is removed like one that applied its
// own removal.

// orphanAsk bounds one question to a member.
const orphanAsk = time.Second

// orphans runs the collector every OrphanInterval.
func (s *Store) orphans() {
	t := time.NewTicker(s.cfg.OrphanInterval)
	defer t.Stop()
	leaderless := map[uint64]int{}
	silent := map[[2]uint64]int{}
	for {
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		s.repairSplits(silent)
		for _, r := range s.replicaList() {
			if r.Leader() != 0 || r.Removed() {
				delete(leaderless, r.ID())
				continue
			}
			leaderless[r.ID()]++
			if leaderless[r.ID()] < 2 {
				continue
			}
			if d, ok := s.removedBy(r.Desc()); ok {
				s.cfg.Logger.Info("replica was removed from its shard while away: deleting it", "shard", d.ID, "epoch", d.Epoch)
				delete(leaderless, r.ID())
				if err := s.removeLocal(d); err != nil {
					s.cfg.Logger.Error("removing an orphan replica", "shard", d.ID, "err", err)
				}
			}
		}
	}
}

// removedBy asks the other members of d for their descriptor of d's
// shard and returns one of a higher epoch that does not list this node.
// The shard may have split while this node was away (a split keeps the
// shard's id and narrows its range): a descriptor whose range lies inside
// d's proves the removal too, and the one returned then spans d's whole
// range at the members' epoch, so removing the replica deletes all it
// held (no replica of the other half can be here: it would overlap).
func (s *Store) removedBy(d shard.Descriptor) (shard.Descriptor, bool) {
	if s.tr == nil {
		return shard.Descriptor{}, false
	}
	members := append(append([]uint64(nil), d.Replicas...), d.Learners...)
	for _, node := range members {
		if node == s.cfg.NodeID {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, orphanAsk)
		req := &wire.Request{Kind: wire.KindNodeInfo, Sender: s.cfg.NodeID}
		if dl, ok := ctx.Deadline(); ok {
			req.DeadlineUnixNano = dl.UnixNano()
		}
		resp, err := s.tr.Request(ctx, node, req)
		cancel()
		if err != nil || resp.Status != wire.StatusOK {
			continue
		}
		var info wire.NodeInfo
		if info.Unmarshal(resp.Value) != nil {
			continue
		}
		for _, b := range info.Descriptors {
			nd, err := shard.UnmarshalDescriptor(b)
			if err == nil && nd.ID == d.ID && within(nd, d) && nd.Epoch > d.Epoch && !nd.HasReplica(s.cfg.NodeID) {
				nd.Start, nd.End = d.Start, d.End
				return nd, true
			}
		}
	}
	return shard.Descriptor{}, false
}

// NodeInfoDescriptors is the descriptors of this node's replicas, as
// wire.NodeInfo carries them.
func (s *Store) NodeInfoDescriptors() [][]byte {
	var out [][]byte
	for _, r := range s.replicaList() {
		out = append(out, r.Desc().Marshal())
	}
	return out
}

// within reports whether in's token range lies inside out's (End 0: the
// end of the ring).
func within(in, out shard.Descriptor) bool {
	return in.Start >= out.Start && (out.End == 0 || in.End != 0 && in.End <= out.End)
}
