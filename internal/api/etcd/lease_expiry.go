package etcdapi

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

// Lease expiry. A lease expires by the clock of the shard owning its
// record (internal/statemachine's replicated shard clock), decided by that
// shard's leader, never by a follower or a wall clock:
//
//   - every leaseTick, each node lists the lease records (from its own
//     replicas) and keeps those of the shards its replicas lead;
//   - it notes, per lease, the shard clock at which it first saw the
//     lease's current renewal count; a lease whose TTL has passed on the
//     shard clock since then expires: its keys are deleted (each on
//     condition that it is still at the version its put with the lease
//     wrote) and its record last, on condition that it was not renewed
//     in between — writes through Raft, which a deposed leader cannot
//     make;
//   - while a node leads a shard owning leases it has the shard clock
//     stamped every tick, so the clock moves with or without writes.
//
// The shard clock runs no faster than real time, so a lease never
// expires before its TTL has passed since its last renewal; it may last
// up to about two ticks longer, and a new leader starts every lease's
// countdown afresh (as etcd's lessor does on promotion).

// leaseTick is how often a node checks the leases its shards own.
const leaseTick = 500 * time.Millisecond

// leaseSeen is a lease's countdown on the node leading its owner shard.
type leaseSeen struct {
	shard    uint64
	renewals uint64
	at       time.Duration // shard clock when these renewals were first seen
}

// expireLoop runs until Stop (started by Serve).
func (s *Server) expireLoop() {
	seen := map[int64]leaseSeen{}
	t := time.NewTicker(leaseTick)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.expireOnce(seen)
	}
}

// expireOnce is one tick of expireLoop.
func (s *Server) expireOnce(seen map[int64]leaseSeen) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	go func() { // Stop cuts a tick short
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	type due struct {
		id       int64
		renewals uint64
	}
	var expired []due
	present := map[int64]bool{}
	owners := map[uint64]bool{}
	err := s.eachLease(ctx, kv.Serializable, func(id int64, e kv.Entry) {
		sh := s.sys.WatchShards(e.Key, nil)[0]
		clock, leads := s.sys.LeaderClock(sh)
		if !leads {
			return
		}
		rec, err := decodeLease(e.Value)
		if err != nil {
			s.cfg.Logger.Error("lease record", "lease", id, "err", err)
			return
		}
		present[id], owners[sh] = true, true
		if rec.Revoking {
			// A revocation a stopped node left half done: finish it.
			expired = append(expired, due{id, rec.Renewals})
			return
		}
		was, ok := seen[id]
		if !ok || was.shard != sh || was.renewals != rec.Renewals || clock < was.at {
			seen[id] = leaseSeen{shard: sh, renewals: rec.Renewals, at: clock}
			return
		}
		if clock-was.at >= time.Duration(rec.TTL)*time.Second {
			expired = append(expired, due{id, rec.Renewals})
		}
	})
	if err != nil {
		s.cfg.Logger.Debug("lease expiry: listing leases", "err", err)
		return
	}
	for id := range seen {
		if !present[id] {
			delete(seen, id) // revoked, or its shard is led elsewhere now
		}
	}
	for sh := range owners {
		s.sys.StampClock(sh)
	}
	for _, d := range expired {
		ok, err := s.revoke(ctx, d.id, int64(d.renewals))
		if err != nil {
			s.cfg.Logger.Warn("lease expiry", "lease", d.id, "err", err)
			continue
		}
		delete(seen, d.id)
		if ok {
			s.cfg.Logger.Debug("lease expired", "lease", d.id)
		}
	}
}
