package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/wire"
)

// forwardAttempt bounds one forwarded attempt (see onLeader).
const forwardAttempt = 2 * time.Second

// onLeader runs req on the shard's leader — in process when that is this
// node — retrying through elections and NotLeader hints until ctx ends.
func (c *Coordinator) onLeader(ctx context.Context, d shard.Descriptor, req *wire.Request) (*wire.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
	}
	backoff := 5 * time.Millisecond
	var lastErr error
	refreshes := 0
	next := 0 // round-robin over replicas when no leader is known
	// A write to a shard this node holds a follower of goes to the leader
	// inside the Raft stream (no request of its own) and is answered when
	// the local replica applies it. Writes that wait for more than a
	// majority need the leader's view of its followers and are sent to it.
	// A linearizable read there asks the leader for its read index through
	// Raft and is served by the local replica once it has applied it.
	var local *replica.Replica
	var viaRaft bool
	paths := func() {
		local = c.cfg.Store.Replica(d.ID)
		// Not through a learner: one still catching up may take its
		// proposal in a snapshot, never answering it. Nor a read through
		// a replica not yet verified (a node just restarted, docs/scrub.md):
		// it would wait for the scrub; the leader answers it. Nor through
		// a replica a move is taking away (Leaving): one that missed the
		// move's end hears from no leader again.
		viaRaft = local != nil && local.Desc().IsVoter(c.cfg.NodeID) && !local.Leaving() &&
			(req.Kind == wire.KindWrite || req.Kind == wire.KindRead && local.Verified()) && int(req.Ack) <= c.majority()
	}
	paths()
	for {
		if err := c.leaderLost(d.ID); err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w (last attempt: %v)", err, lastErr)
			}
			return nil, err
		}
		target := c.leaderGuess(d)
		if target == 0 {
			target = d.Replicas[next%len(d.Replicas)]
			next++
		}
		var resp *wire.Response
		var err error
		switch {
		case target == c.cfg.NodeID:
			resp = c.handleLocal(ctx, req)
		case viaRaft:
			// Bounded like a remote attempt: a proposal dropped on its way
			// to the leader is retried. After a timeout the request goes
			// to the leader over gRPC instead, in case the Raft stream is
			// what is broken.
			actx, cancel := context.WithTimeout(ctx, forwardAttempt)
			if req.Kind == wire.KindWrite {
				resp = c.execWriteVia(actx, local, req, true)
			} else {
				resp = c.execReadVia(actx, local, req, true)
			}
			cancel()
			if resp.Status == wire.StatusTimeout {
				viaRaft = false
			}
		default:
			// One attempt on a remote node is bounded, so a node that
			// hangs (paused, partitioned) does not hold the request past
			// the election that replaces it; the retry carries the same
			// request id, so a write still applies at most once.
			actx, cancel := context.WithTimeout(ctx, forwardAttempt)
			if local != nil && !local.Removed() && !local.Leaving() {
				// This node's replica of the shard losing its leader
				// meanwhile ends the attempt too: the request is then
				// answered no leader (above), not after the bound. (A
				// replica a move took away, or is taking away, may hear
				// from no leader again; the request goes to the shard's
				// members, as leaderLost lets it.)
				endWhenLeaderLost(actx, cancel, local)
			}
			resp, err = c.cfg.Transport.Request(actx, target, req)
			cancel()
			if err == nil {
				c.noteDepth(d.ID, target, resp.Queue)
			}
		}
		switch {
		case err != nil, resp.Status == wire.StatusError:
			if err == nil {
				err = errors.New(resp.Message)
			}
			lastErr = err
			c.setLeader(d.ID, 0)
			next++
		case resp.Status == wire.StatusNotLeader || resp.Status == wire.StatusNoReplica:
			lastErr = fmt.Errorf("node %d is not the leader of shard %d", target, d.ID)
			c.setLeader(d.ID, resp.Leader)
			if resp.Leader != 0 && resp.Leader != target {
				continue // follow the hint at once
			}
		case resp.Status == wire.StatusWrongShard && refreshes < maxRefreshes:
			// The shard's members changed (a move) or its range did (a
			// split): retry at once with the current descriptor of the
			// shard that owns the key. When this node knows nothing
			// newer yet (the split is applied there but not here), wait
			// a little and look again.
			refreshes++
			lastErr = errors.New(resp.Message)
			was := d
			if c.refreshRoute(&d, req, resp) {
				paths()
				if d.ID != was.ID || d.Epoch > was.Epoch {
					continue
				}
				// The answer's view of the shard is older than this
				// node's: the replica that answered has not applied the
				// shard's last change yet (or this node's view was
				// wrong). Retry with it after the backoff, not at once:
				// a request must not spend its refreshes in a moment
				// going back and forth between a replica that has
				// applied the change and one that has not.
			}
		case resp.Status == wire.StatusStopping && local != nil && (local.Removed() || c.cfg.Store.Replica(d.ID) != local):
			// The local replica was just removed from the shard (a move
			// took it away, or a scrub repair replaces it): go to the
			// leader over the wire instead.
			local, viaRaft = nil, false
			lastErr = errors.New(resp.Message)
			continue
		case resp.Status == wire.StatusTimeout && ctx.Err() == nil:
			// The leader gave up before our deadline (its own deadline is
			// ours; only clock skew gets here): retry.
			lastErr = errors.New(resp.Message)
		default:
			if target != c.cfg.NodeID {
				c.setLeader(d.ID, target)
			}
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: shard %d: %v", ErrTimeout, d.ID, lastErr)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// anyReplica runs a local-replica request (serializable read) on some
// replica of the shard, first (if it is one), then each in turn until
// one answers.
//
// A wrong-shard answer moves the request to a newer view of the shard
// (another epoch after a move, the owner after a split) only when that
// view is newer than the one it has: a replica that has not applied the
// shard's last change yet answers with an older one, and adopting it
// would send the request back and forth between replicas that disagree.
// Such a replica is passed over for the next one of the current view.
func (c *Coordinator) anyReplica(ctx context.Context, d shard.Descriptor, req *wire.Request, first uint64) (*wire.Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
	}
	var lastErr error
	refreshes, behind := 0, 0
	start := max(slices.Index(d.Replicas, first), 0)
	for i := 0; ; i++ {
		target := d.Replicas[(start+i)%len(d.Replicas)]
		// One attempt is bounded, as in onLeader: a replica that hangs
		// (a paused node) costs the read that much, then the next one
		// answers it. A local read is quick, so the bound starts at a
		// quarter of onLeader's and doubles each round (a loaded node
		// may be slow to answer, not gone).
		bound := forwardAttempt / 4 << min(i/len(d.Replicas), 2)
		actx, cancel := context.WithTimeout(ctx, bound)
		resp, err := c.cfg.Transport.Request(actx, target, req)
		cancel()
		if err == nil && resp.Status == wire.StatusTimeout && ctx.Err() == nil {
			err = errors.New(resp.Message) // the attempt's bound, not the read's
		}
		if err == nil {
			c.noteDepth(d.ID, target, resp.Queue)
		}
		if err == nil && resp.Status == wire.StatusWrongShard {
			was, wasReq := d, *req
			if refreshes < maxRefreshes && c.refreshRoute(&d, req, resp) &&
				(d.ID != was.ID || d.Epoch > was.Epoch || behind >= len(was.Replicas)-1) {
				// A newer view; or an older one after as many refusals
				// as the view has replicas: then this node's view is
				// what is wrong. Ask the replicas of the view adopted.
				refreshes++
				behind, start, i = 0, 0, -1
				continue
			}
			d, *req = was, wasReq
			// Behind this node's view (or knowing nothing newer): the
			// next replica. Refused by every replica, rounds on end, the
			// answer is the refusal.
			if behind++; behind >= 3*len(d.Replicas) {
				return resp, nil
			}
			lastErr = errors.New(resp.Message)
		} else if err == nil && resp.Status != wire.StatusNoReplica {
			return resp, nil
		} else {
			lastErr = err
		}
		if i%len(d.Replicas) == len(d.Replicas)-1 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: shard %d: %v", ErrTimeout, d.ID, lastErr)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// leaderLost returns ErrNoLeader when this node holds a voting replica of
// the shard that has known no leader for an election timeout
// (replica.LeaderLost): the node is cut off from the shard's other
// replicas, or the shard has no quorum. A request there would wait for
// its deadline (a follower without a leader hands nothing on, and the
// other replicas are out of reach), so onLeader answers at once and the
// client tries another node. A replica a move took away, or is taking
// away (Leaving: one that missed the move's end hears from no leader
// until it is collected), does not count: the request goes to the
// shard's current members over the network. (The price: a node cut off
// during a move's joint step holds such a request to its deadline.)
func (c *Coordinator) leaderLost(shardID uint64) error {
	r := c.cfg.Store.Replica(shardID)
	if r == nil || !r.LeaderLost() || r.Removed() || r.Leaving() {
		return nil
	}
	return fmt.Errorf("%w: shard %d: this node's replica has known no leader for an election timeout (cut off from the shard's other replicas, or the shard has lost its quorum)", ErrNoLeader, shardID)
}

// endWhenLeaderLost calls cancel (ending ctx, an attempt's) when r
// reports LeaderLost, at once if it does already; its goroutine ends with
// ctx.
func endWhenLeaderLost(ctx context.Context, cancel context.CancelFunc, r *replica.Replica) {
	lost := r.LeaderLostCh()
	go func() {
		select {
		case <-lost:
			cancel()
		case <-ctx.Done():
		}
	}()
}

// leaderGuess is the leader this node believes in (0 = unknown).
func (c *Coordinator) leaderGuess(d shard.Descriptor) uint64 {
	if r := c.cfg.Store.Replica(d.ID); r != nil {
		if l := r.Leader(); l != 0 {
			return l
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.leaders[d.ID]
}

func (c *Coordinator) setLeader(shardID, node uint64) {
	c.mu.Lock()
	c.mu.leaders[shardID] = node
	c.mu.Unlock()
}
