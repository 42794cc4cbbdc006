package replica

import (
	"context"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/cairn-db/cairn/internal/wire"
)

// ProposeScrub proposes a scrub entry with the given id: every replica
// that applies it hashes its data at the entry's index (Config.OnScrub).
// A follower hands the proposal to its leader inside the Raft stream. It
// does not wait: a proposal lost in an election is simply not applied,
// and the next scrub is proposed later.
func (r *Replica) ProposeScrub(id uint64) {
	data := wire.MarshalScrub(id)
	r.report(func(rn *raft.RawNode) { _ = rn.Propose(data) })
}

// scrubLocked hands a snapshot of the data at the scrub entry just
// applied (index) to Config.OnScrub.
func (r *Replica) scrubLocked(id, index uint64) {
	if r.cfg.OnScrub == nil {
		return
	}
	d := r.Desc()
	r.cfg.OnScrub(r.id, id, index, d.Start, d.End, r.cfg.Engine.NewSnapshot())
}

// Verified reports whether the replica's data is known to agree with its
// shard's. A replica opened over data that was on disk while the node
// was down is unverified (when the store scrubs) until a scrub finds its
// hashes equal to the majority's; an unverified replica must not serve
// reads, nor lead.
func (r *Replica) Verified() bool { return !r.unverified.Load() }

// SetVerified marks the replica's data as checked (true) or not.
func (r *Replica) SetVerified(ok bool) { r.unverified.Store(!ok) }

// WaitVerified waits until the replica is verified (at once when it is),
// the replica stops (ErrStopped) or ctx ends. Reads served from the local
// data call it first, so a replica whose files changed while its node was
// down answers nothing before a scrub has compared it with its peers.
func (r *Replica) WaitVerified(ctx context.Context) error {
	if !r.unverified.Load() {
		return nil
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for r.unverified.Load() {
		if r.stopped.Load() {
			return ErrStopped
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
