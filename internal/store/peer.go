package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/transport"
	"go.etcd.io/raft/v3/raftpb"
)

// HandleRaft routes incoming messages to their replicas. Nothing from
// the network is trusted until peers authenticate: a message for a shard
// this node does not hold, from a node that is not a replica of the shard,
// not addressed to this node, or that raft could not take without
// breaking (see checkMessage) is dropped and counted.
func (s *Store) HandleRaft(envs []transport.Envelope) {
	for i := range envs {
		e := &envs[i]
		r := s.replica(e.ShardID)
		if r == nil {
			s.drop(s.missingReason(e.ShardID), e)
			continue
		}
		if why := checkMessage(r.Desc(), s.cfg.NodeID, &e.Msg, false); why >= 0 {
			s.drop(why, e)
			continue
		}
		r.Step(e.Msg)
	}
}

// HandleSnapshot receives a snapshot stream for a local replica after the
// same checks as HandleRaft; the replica spills the data to disk as it
// arrives and installs it atomically (replica.ReceiveSnapshot).
func (s *Store) HandleSnapshot(ctx context.Context, env transport.Envelope, next func() ([]byte, error)) error {
	r := s.replica(env.ShardID)
	if r == nil {
		why := s.missingReason(env.ShardID)
		s.drop(why, &env)
		return fmt.Errorf("%w: shard %d: %s", ErrDropped, env.ShardID, DropReasons[why])
	}
	if why := checkMessage(r.Desc(), s.cfg.NodeID, &env.Msg, true); why >= 0 {
		s.drop(why, &env)
		return fmt.Errorf("%w: %s", ErrDropped, DropReasons[why])
	}
	installed, err := r.ReceiveSnapshot(ctx, env.Msg, next)
	if err != nil {
		s.cfg.Logger.Warn("snapshot receive failed", "shard", env.ShardID, "from", env.Msg.From, "err", err)
		return err
	}
	s.cfg.Logger.Info("snapshot received", "shard", env.ShardID, "from", env.Msg.From,
		"index", env.Msg.Snapshot.Metadata.Index, "installed", installed)
	return nil
}

// ErrDropped is returned for a snapshot stream the store refused.
var ErrDropped = errors.New("store: message dropped")

func (s *Store) drop(why int, e *transport.Envelope) {
	s.drops[why].Add(1)
	s.cfg.Logger.Debug("dropped peer message", "reason", DropReasons[why], "shard", e.ShardID,
		"type", e.Msg.Type, "from", e.Msg.From, "to", e.Msg.To, "term", e.Msg.Term)
}

// Dropped counts the messages from peers dropped so far, by reason
// (indexed like DropReasons).
func (s *Store) Dropped() [numDrops]uint64 {
	var out [numDrops]uint64
	for i := range out {
		out[i] = s.drops[i].Load()
	}
	for _, r := range s.replicaList() {
		out[DropImpossible] += r.DroppedMessages()
	}
	return out
}

// sendSnapshot streams the snapshot raft asked for from the engine
// snapshot the replica pinned for it, on a goroutine of its own (at most
// MaxSnapshots at once), outside every lock; raft learns the outcome
// through ReportSnapshot.
func (s *Store) sendSnapshot(shardID uint64, m raftpb.Message) {
	r := s.replica(shardID)
	if r == nil {
		return
	}
	src, err := r.OpenSnapshot(m, s.cfg.SnapshotChunk)
	if err != nil {
		s.cfg.Logger.Warn("snapshot not sent", "shard", shardID, "to", m.To, "err", err)
		r.ReportSnapshot(m.To, false)
		return
	}
	select {
	case s.snapSem <- struct{}{}:
	default:
		src.Close()
		r.ReportSnapshot(m.To, false)
		return
	}
	s.goFunc(func() {
		defer func() { <-s.snapSem }()
		defer src.Close()
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Minute)
		defer cancel()
		err := s.tr.SendSnapshot(ctx, m.To, transport.Envelope{ShardID: shardID, Msg: m}, src)
		chunks, size, largest := src.Stats()
		s.snapStats.record(err == nil, chunks, size, largest)
		if err != nil {
			s.cfg.Logger.Warn("snapshot send failed", "shard", shardID, "to", m.To, "err", err)
		} else {
			s.cfg.Logger.Info("snapshot sent", "shard", shardID, "to", m.To,
				"index", m.Snapshot.Metadata.Index, "bytes", size, "chunks", chunks, "largest_chunk", largest)
		}
		r.ReportSnapshot(m.To, err == nil)
	})
}

// SnapshotStats counts the snapshots this node streamed.
type SnapshotStats struct {
	Sent, Failed uint64 // streams that ended well, and the others
	Chunks       uint64 // chunks streamed
	Bytes        uint64 // data bytes streamed
	MaxChunk     uint64 // the largest chunk, in bytes
}

type snapCounters struct {
	sent, failed, chunks, bytes, maxChunk atomic.Uint64
}

func (c *snapCounters) record(ok bool, chunks, size, largest int) {
	if ok {
		c.sent.Add(1)
	} else {
		c.failed.Add(1)
	}
	c.chunks.Add(uint64(chunks))
	c.bytes.Add(uint64(size))
	for {
		m := c.maxChunk.Load()
		if uint64(largest) <= m || c.maxChunk.CompareAndSwap(m, uint64(largest)) {
			return
		}
	}
}

// SnapshotStats returns the counters of outgoing snapshots.
func (s *Store) SnapshotStats() SnapshotStats {
	c := &s.snapStats
	return SnapshotStats{Sent: c.sent.Load(), Failed: c.failed.Load(), Chunks: c.chunks.Load(),
		Bytes: c.bytes.Load(), MaxChunk: c.maxChunk.Load()}
}
