package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/cairn-db/cairn/internal/raftlog"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/wire"
)

// openReplicas opens every replica this node holds: those the bootstrap
// map places here (created with bootstrap) and those moves created
// (found by their state in the engine). A replica whose persisted
// descriptor no longer lists this node applied its own removal before a
// crash: its deletion is finished now. Raft state with no descriptor, of
// a shard the map does not place here, has no known range: its state is
// deleted, its data (if any) left in place, with a warning.
func (s *Store) openReplicas(bootstrap bool) error {
	eng := s.cfg.Engine
	local, err := storage.LocalShards(eng)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	cands := map[uint64]shard.Descriptor{}
	for _, d := range s.cfg.Map.Shards {
		s.mu.known[d.ID] = d.Clone()
		if d.HasReplica(s.cfg.NodeID) {
			cands[d.ID] = d
		}
	}
	for _, id := range local {
		if _, ok := cands[id]; !ok {
			cands[id] = shard.Descriptor{ID: id}
		}
	}
	for id, d := range cands {
		if epoch, dead := s.tombstone(id); dead {
			s.mu.tombs[id] = epoch
			continue
		}
		has, err := raftlog.Exists(eng, id)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if has {
			stored, found, err := replica.StoredDescriptor(eng, id)
			if err != nil {
				return fmt.Errorf("store: %w", err)
			}
			if found {
				d = stored
			} else if !d.HasReplica(s.cfg.NodeID) {
				// Raft state without a descriptor, of a shard the map
				// does not place here: its range is unknown (the zero
				// descriptor's would be the node's whole data space).
				s.cfg.Logger.Warn("replica state without a descriptor, of a shard not placed on this node: "+
					"deleting its raft state and history; its range is unknown, so its data, if any, is left in place",
					"shard", id)
				if err := s.destroyState(id); err != nil {
					return err
				}
				continue
			}
			if !d.HasReplica(s.cfg.NodeID) {
				s.cfg.Logger.Info("finishing the removal of a replica", "shard", id, "epoch", d.Epoch)
				if err := s.destroy(d); err != nil {
					return err
				}
				continue
			}
		} else if d.Epoch == 0 {
			// Shard-local keys without replica state, of a shard the map
			// does not place here: nothing to open.
			continue
		}
		r, err := replica.Open(s.replicaConfig(d), bootstrap)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if r.Removed() {
			r.Stop()
			if err := s.destroy(r.Desc()); err != nil {
				return err
			}
			continue
		}
		if has && s.cfg.ScrubInterval > 0 {
			// Its data was on disk while the node was down: compared
			// with its peers before it serves reads (scrub.go).
			r.SetVerified(false)
		}
		s.mu.replicas[id] = r
		s.sched.add(id)
	}
	return nil
}

// tombstone reports whether the engine holds a tombstone for shard id.
func (s *Store) tombstone(id uint64) (uint64, bool) {
	b, err := s.cfg.Engine.Get(storage.TombstoneKey(id))
	if err != nil || len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// missingReason is why a message for a shard without local replica is
// dropped.
func (s *Store) missingReason(id uint64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.mu.tombs[id]; ok {
		return DropRemoved
	}
	return DropUnknownShard
}

// Descriptors returns the node's current view of every shard it knows,
// sorted by shard id: the descriptor of the highest epoch among its local
// replica's (which follows the conf changes it applies) and the latest
// one it saw otherwise (the bootstrap map's, one learned from a peer or
// from the leader that ran a change, or the one that removed its
// replica). Voters are in Replicas, learners in Learners.
func (s *Store) Descriptors() []shard.Descriptor {
	s.mu.RLock()
	out := make([]shard.Descriptor, 0, len(s.mu.known)+len(s.mu.replicas))
	for id, d := range s.mu.known {
		if r := s.mu.replicas[id]; r != nil && r.Desc().Epoch >= d.Epoch {
			d = r.Desc()
		}
		out = append(out, d.Clone())
	}
	for id, r := range s.mu.replicas {
		if _, ok := s.mu.known[id]; !ok {
			out = append(out, r.Desc().Clone())
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Descriptor returns the node's current view of one shard.
func (s *Store) Descriptor(id uint64) (shard.Descriptor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.mu.known[id]
	if r := s.mu.replicas[id]; r != nil && (!ok || r.Desc().Epoch >= d.Epoch) {
		return r.Desc(), true
	}
	return d, ok
}

// LearnDescriptor records d as the latest view of its shard if its epoch
// is newer than what the node knew. It reports whether d was news.
func (s *Store) LearnDescriptor(d shard.Descriptor) bool {
	if d.ID == 0 || len(d.Replicas) == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mu.replicas[d.ID]; r != nil && r.Desc().Epoch >= d.Epoch {
		return false
	}
	if old, ok := s.mu.known[d.ID]; ok && old.Epoch >= d.Epoch {
		return false
	}
	s.mu.known[d.ID] = d.Clone()
	s.routesChanged()
	return true
}

// queueRemoval is every replica's OnRemoved: it runs under the replica's
// lock, so it only queues the work for the reaper.
func (s *Store) queueRemoval(d shard.Descriptor) {
	s.removals.Lock()
	s.removals.queue = append(s.removals.queue, d)
	s.removals.Unlock()
	select {
	case s.removals.wake <- struct{}{}:
	default:
	}
}

// reaper removes the replicas that applied their own removal: it takes
// them out of the store, stops them and deletes their data.
func (s *Store) reaper() {
	for {
		select {
		case <-s.removals.wake:
		case <-s.ctx.Done():
			return
		}
		s.removals.Lock()
		q := s.removals.queue
		s.removals.queue = nil
		s.removals.Unlock()
		for _, d := range q {
			if err := s.removeLocal(d); err != nil {
				s.cfg.Logger.Error("removing a replica", "shard", d.ID, "err", err)
			}
		}
	}
}

// removeLocal takes the local replica of d's shard out of the store (new
// messages for it are refused from now on), stops it and deletes its
// state. d is the descriptor that removed it. The same removal may be
// asked twice (the reaper, when the replica applied it, and the orphan
// collector or a scrub repair, from the members' descriptor): a call
// that finds the removal done, or a newer replica of the shard in the
// replica's place (the node was added back), does nothing.
func (s *Store) removeLocal(d shard.Descriptor) error {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	return s.removeLocalLocked(d)
}

// removeLocalLocked is removeLocal under s.lifecycle.
func (s *Store) removeLocalLocked(d shard.Descriptor) error {
	s.mu.Lock()
	r := s.mu.replicas[d.ID]
	if r != nil && !r.Removed() {
		if cur := r.Desc(); cur.Epoch > d.Epoch && cur.HasReplica(s.cfg.NodeID) {
			s.mu.Unlock()
			return nil // a member again, or a replica created since
		}
	}
	if epoch, dead := s.mu.tombs[d.ID]; r == nil && dead && epoch >= d.Epoch {
		s.mu.Unlock()
		return nil // deleted already
	}
	delete(s.mu.replicas, d.ID)
	s.mu.tombs[d.ID] = d.Epoch
	if old, ok := s.mu.known[d.ID]; !ok || old.Epoch < d.Epoch {
		s.mu.known[d.ID] = d.Clone()
	}
	s.mu.Unlock()
	s.routesChanged()
	s.sched.remove(d.ID)
	if r != nil {
		r.Stop() // waits for a round in progress
	}
	s.cfg.Logger.Info("replica removed: deleting its data", "shard", d.ID, "epoch", d.Epoch)
	return s.destroy(d)
}

// destroy deletes a removed replica's data, shard-local state and
// history and writes its tombstone, in one synced batch. d's range must
// be the replica's: the zero descriptor's is every shard's data.
func (s *Store) destroy(d shard.Descriptor) error {
	eng := s.cfg.Engine
	b := eng.NewBatch()
	ds, de := storage.DataSpan(d.Start, d.End)
	b.DeleteRange(ds, de)
	// With the data: a crash before DropDerived below is done leaves the
	// marker, and the next open drops the range's entries.
	storage.MarkDerivedPending(b, d.Start, d.End)
	deleteState(b, d.ID, d.Epoch)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: delete removed replica of shard %d: %w", d.ID, err)
	}
	// The node's key-order and secondary indexes derived from the range
	// (crash-safe on its own: a marker makes the next open finish it).
	if err := eng.DropDerived(d.Start, d.End); err != nil {
		return fmt.Errorf("store: drop the indexes of removed shard %d: %w", d.ID, err)
	}
	s.mu.Lock()
	s.mu.tombs[d.ID] = d.Epoch
	s.mu.Unlock()
	return nil
}

// destroyState deletes the shard-local state (raft log, hard and applied
// state, descriptor) and history of shard id and writes its tombstone at
// epoch 0, in one synced batch, and leaves the data space alone: for a
// replica whose range is unknown.
func (s *Store) destroyState(id uint64) error {
	b := s.cfg.Engine.NewBatch()
	deleteState(b, id, 0)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("store: delete the state of shard %d: %w", id, err)
	}
	s.mu.Lock()
	s.mu.tombs[id] = 0
	s.mu.Unlock()
	return nil
}

// deleteState adds to b the deletion of shard id's shard-local keys and
// history and its tombstone at epoch.
func deleteState(b *storage.Batch, id, epoch uint64) {
	ls, le := storage.ShardLocalSpan(id)
	b.DeleteRange(ls, le)
	hs, he := storage.HistorySpan(id)
	b.DeleteRange(hs, he)
	b.Set(storage.TombstoneKey(id), binary.BigEndian.AppendUint64(nil, epoch))
}

// Errors of replica creation.
var (
	// ErrRemoved: the shard's replica on this node was removed at an
	// epoch at least the one asked for.
	ErrRemoved = errors.New("store: replica was removed from this node")
	// ErrBadDescriptor: a creation request whose descriptor does not name
	// this node as a learner of the shard.
	ErrBadDescriptor = errors.New("store: bad descriptor")
)

// CreateReplica creates an empty replica of d's shard on this node,
// asked by the shard's leader through wire.KindCreateReplica: a learner
// (the first step of adding it), or a voter of a shard a split made that
// this node missed (split.go). Idempotent: an existing replica is left
// alone, unless it applied its own removal (its deletion, which may be
// waiting for the reaper, is done first: a removed replica never serves
// again). A removal under way is waited for. Refused when d does not
// list this node, while a local replica of another shard owns part of
// d's range, or when the node's replica of the shard was removed at d's
// epoch or later (a late request never brings back a removed replica).
func (s *Store) CreateReplica(d shard.Descriptor) error {
	if d.ID == 0 || !d.HasReplica(s.cfg.NodeID) || len(d.Replicas) == 0 {
		return fmt.Errorf("%w: shard %d does not list node %d", ErrBadDescriptor, d.ID, s.cfg.NodeID)
	}
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if r := s.replica(d.ID); r != nil && r.Removed() {
		if err := s.removeLocalLocked(r.Desc()); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.replicas[d.ID] != nil {
		return nil
	}
	if s.overlapsLocked(d) {
		// Never two local replicas over one key: a local replica that
		// still owns part of the range has not applied the split that
		// made d's shard (it creates that replica itself when it does),
		// and a snapshot it installs would clear the range it owns.
		// (A voter's replica is created empty only for a shard a split
		// made that this node missed, split.go.)
		return fmt.Errorf("%w: a local replica still owns part of shard %d's range [%x,%x)",
			ErrBadDescriptor, d.ID, d.Start, d.End)
	}
	if k, ok := s.mu.known[d.ID]; ok && k.Epoch >= d.Epoch && (k.Start != d.Start || k.End != d.End) {
		// (A newer descriptor may own less: the shard split since.)
		return fmt.Errorf("%w: shard %d owns [%x,%x), not [%x,%x)", ErrBadDescriptor, d.ID, k.Start, k.End, d.Start, d.End)
	}
	if epoch, dead := s.mu.tombs[d.ID]; dead && epoch >= d.Epoch {
		return fmt.Errorf("%w: shard %d at epoch %d", ErrRemoved, d.ID, epoch)
	}
	// Create replaces the tombstone of an older epoch by the new state in
	// one batch: a crash in between would leave neither, and a shard of
	// the bootstrap map without state does not open.
	r, err := replica.Create(s.replicaConfig(d.Clone()))
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	delete(s.mu.tombs, d.ID)
	s.mu.replicas[d.ID] = r
	s.sched.add(d.ID)
	s.routesChanged()
	s.cfg.Logger.Info("created an empty learner replica", "shard", d.ID, "epoch", d.Epoch)
	return nil
}

// handleCreate answers a wire.KindCreateReplica request.
func (s *Store) handleCreate(req *wire.Request) *wire.Response {
	d, err := shard.UnmarshalDescriptor(req.Command)
	if err != nil || d.ID != req.ShardID {
		return &wire.Response{Status: wire.StatusInvalid, Message: fmt.Sprintf("bad descriptor: %v", err)}
	}
	if err := s.CreateReplica(d); err != nil {
		return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
	}
	return &wire.Response{Status: wire.StatusOK}
}
