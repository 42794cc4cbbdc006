package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/wire"
)

// HandleRequest executes a request against a local replica, never
// forwarding it further. It serves both the in-process path and requests
// forwarded by other nodes.
func (c *Coordinator) HandleRequest(ctx context.Context, req *wire.Request) *wire.Response {
	if req.DeadlineUnixNano != 0 {
		// The sender's wall clock set it: a write waits no longer than
		// the retry window whatever that clock says.
		dl := c.cfg.Clock.FromWall(time.Unix(0, req.DeadlineUnixNano))
		if limit := time.Now().Add(c.cfg.RetryWindow); req.Kind == wire.KindWrite && dl.After(limit) {
			dl = limit
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	q, refused := c.admitForwarded(req)
	if refused != nil {
		return refused
	}
	if q == nil {
		return c.handleLocal(ctx, req)
	}
	defer q.leave()
	resp := c.handleLocal(ctx, req)
	// The answer tells the sender how busy this node's replica of the
	// shard is (without this request), for its choice of replica.
	resp.Queue = uint32(max(q.depth.Load()-1, 0))
	return resp
}

// handleLocal is HandleRequest under the caller's deadline (ctx already
// carries the request's).
func (c *Coordinator) handleLocal(ctx context.Context, req *wire.Request) *wire.Response {
	switch req.Kind {
	case wire.KindNodeInfo:
		return &wire.Response{Status: wire.StatusOK, Value: c.nodeInfo().Marshal()}
	case wire.KindScan:
		var sq wire.ScanRequest
		if err := sq.Unmarshal(req.Command); err != nil {
			return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
		}
		res, err := c.serveScan(ctx, &sq)
		if err != nil {
			return errResponse(err)
		}
		return &wire.Response{Status: wire.StatusOK, Value: res.Marshal()}
	}
	if resp, ok := c.cfg.Store.HandleAdmin(ctx, req); ok {
		return resp // membership changes (store/moves.go)
	}
	r := c.cfg.Store.Replica(req.ShardID)
	if r == nil || req.Kind == wire.KindReadLocal && r.Applied() == 0 {
		// No replica, or one a move created that holds nothing yet.
		return &wire.Response{Status: wire.StatusNoReplica, Leader: c.leaderGuessID(req.ShardID)}
	}
	if resp := c.checkRoute(r, req); resp != nil {
		return resp
	}
	switch req.Kind {
	case wire.KindWrite:
		return c.execWrite(ctx, r, req)
	case wire.KindRead:
		return c.execRead(ctx, r, req)
	case wire.KindReadLocal:
		if !r.Verified() {
			// Not yet compared with its peers (docs/scrub.md): the
			// asker tries another replica.
			return &wire.Response{Status: wire.StatusNoReplica, Leader: c.leaderGuessID(req.ShardID)}
		}
		return c.readAnswer(r, req.Key)
	case wire.KindHead:
		return c.execHead(ctx, r, req)
	case wire.KindAppliedIndex:
		if err := r.WaitApplied(ctx, req.Index); err != nil {
			return errResponse(err)
		}
		return &wire.Response{Status: wire.StatusOK, Index: r.Applied()}
	}
	return &wire.Response{Status: wire.StatusInvalid, Message: "unknown request kind"}
}

// checkRoute refuses (StatusWrongShard) a request the shard must not
// serve: one carrying a descriptor epoch (0: none, as from older nodes)
// other than the local replica's, or whose key — for a write, the key of
// the command that would be applied — is outside the shard's token range.
// Without it, a request naming any shard would write any key into that
// shard's replicas, which do not own it.
func (c *Coordinator) checkRoute(r *replica.Replica, req *wire.Request) *wire.Response {
	d := r.Desc()
	if req.Epoch != 0 && req.Epoch != d.Epoch {
		// The answer carries this replica's descriptor: the coordinator
		// adopts it and retries (refreshRoute).
		resp := c.refuse("shard %d is at epoch %d, the request names epoch %d", d.ID, d.Epoch, req.Epoch)
		resp.Value = d.Marshal()
		return resp
	}
	var key []byte
	switch req.Kind {
	case wire.KindWrite:
		if req.Decoded == nil {
			cmd := new(wire.Command)
			if err := cmd.Unmarshal(req.Command); err != nil {
				return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
			}
			req.Decoded = cmd
		}
		key = req.Decoded.Key
	case wire.KindRead, wire.KindReadLocal, wire.KindHead:
		key = req.Key
	default:
		return nil
	}
	if !d.Contains(shard.Token(key)) {
		return c.ownerAnswer(c.refuse("key %q is outside shard %d's token range", truncKey(key), d.ID), d, key)
	}
	return nil
}

func (c *Coordinator) refuse(format string, args ...any) *wire.Response {
	c.refused.Add(1)
	return &wire.Response{Status: wire.StatusWrongShard, Message: fmt.Sprintf(format, args...)}
}

// Refused counts the requests refused because their shard does not own
// their key or their epoch is not the shard's.
func (c *Coordinator) Refused() uint64 { return c.refused.Load() }

func truncKey(k []byte) []byte {
	if len(k) > 64 {
		return k[:64]
	}
	return k
}

func (c *Coordinator) leaderGuessID(shardID uint64) uint64 {
	d := c.descriptor(shardID)
	if d.ID == 0 {
		return 0
	}
	return c.leaderGuess(d)
}

func (c *Coordinator) execWrite(ctx context.Context, r *replica.Replica, req *wire.Request) *wire.Response {
	return c.execWriteVia(ctx, r, req, false)
}

// execWriteVia proposes a write on the local replica r; with forward, a
// follower hands it to its leader through Raft (replica.ProposeForward).
func (c *Coordinator) execWriteVia(ctx context.Context, r *replica.Replica, req *wire.Request, forward bool) *wire.Response {
	cmd := req.Decoded
	if cmd == nil {
		cmd = new(wire.Command)
		if err := cmd.Unmarshal(req.Command); err != nil {
			return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
		}
	}
	propose := r.ProposeEncoded
	if forward {
		propose = r.ProposeForward
	}
	res, err := propose(ctx, cmd.RequestID, cmd.Key, req.Command)
	if err != nil {
		return errResponse(err)
	}
	// Index: the write's log index, which a delete of an absent key
	// answers as its revision (Coordinator.Delete).
	resp := &wire.Response{Status: res.Status, Version: res.Version, Created: res.Created, Index: res.Index}
	if res.Status == wire.StatusWrongShard {
		// Proposed before the shard split, applied after: nothing was
		// written; the answer names the shard that owns the key now.
		c.refused.Add(1)
		resp.Message = fmt.Sprintf("shard %d split: key %q is another shard's now", r.ID(), truncKey(cmd.Key))
		return c.ownerAnswer(resp, r.Desc(), cmd.Key)
	}
	if res.Status == wire.StatusOK && int(req.Ack) > c.majority() {
		if err := r.WaitReplicated(ctx, res.Index, int(req.Ack)); err != nil {
			return &wire.Response{Status: wire.StatusAckTimeout,
				Message: "the write committed on a majority but fewer than ACK replicas confirmed it in time"}
		}
	}
	return resp
}

func (c *Coordinator) execRead(ctx context.Context, r *replica.Replica, req *wire.Request) *wire.Response {
	return c.execReadVia(ctx, r, req, false)
}

// execReadVia serves a linearizable read from the local replica r; with
// forward, a follower gets the read index from its leader through Raft
// (replica.ReadIndexForward).
func (c *Coordinator) execReadVia(ctx context.Context, r *replica.Replica, req *wire.Request, forward bool) *wire.Response {
	readIndex := r.ReadIndex
	if forward {
		readIndex = r.ReadIndexForward
	}
	idx, err := readIndex(ctx)
	if err != nil {
		return errResponse(err)
	}
	if err := r.WaitVerified(ctx); err != nil {
		return errResponse(err)
	}
	if int(req.Ack) > c.majority() {
		if !c.waitAppliedOn(ctx, r, idx, int(req.Ack)) {
			return &wire.Response{Status: wire.StatusAckTimeout,
				Message: "fewer than ACK replicas applied the read index in time"}
		}
	}
	return c.readAnswer(r, req.Key)
}

// readAnswer serves a read from the local replica r once it has applied
// what the read needs; a key its shard no longer owns (it split since
// the request was routed) is refused with the owner named.
func (c *Coordinator) readAnswer(r *replica.Replica, key []byte) *wire.Response {
	v, err := c.readLocal(r, key)
	if errors.Is(err, statemachine.ErrWrongShard) {
		d := r.Desc()
		return c.ownerAnswer(c.refuse("key %q is outside shard %d's token range", truncKey(key), d.ID), d, key)
	}
	return valueResponse(v, err)
}

// waitAppliedOn asks the other replicas of r's shard to confirm they have
// applied index; true once n replicas (this one included) have.
func (c *Coordinator) waitAppliedOn(ctx context.Context, r *replica.Replica, index uint64, n int) bool {
	ok := make(chan bool, len(r.Desc().Replicas))
	var wg sync.WaitGroup
	for _, node := range r.Desc().Replicas {
		if node == c.cfg.NodeID {
			continue
		}
		wg.Add(1)
		go func(node uint64) {
			defer wg.Done()
			ok <- c.appliedOn(ctx, node, r.ID(), index)
		}(node)
	}
	go func() { wg.Wait(); close(ok) }()
	count := 1
	for res := range ok {
		if res {
			count++
		}
		if count >= n {
			return true
		}
	}
	return count >= n
}

// appliedOn reports whether node's replica of the shard confirms it has
// applied index, asking again until ctx ends. A peer that was down a
// moment ago stays unreachable for up to the transport's reconnect
// backoff after it is back, and a failed ask ends at once: giving up on
// the first one would answer ack_timeout long before the deadline the
// client gave.
func (c *Coordinator) appliedOn(ctx context.Context, node, shardID, index uint64) bool {
	req := &wire.Request{Kind: wire.KindAppliedIndex, Sender: c.cfg.NodeID, ShardID: shardID, Index: index}
	if dl, has := ctx.Deadline(); has {
		req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
	}
	backoff := 20 * time.Millisecond
	for {
		resp, err := c.cfg.Transport.Request(ctx, node, req)
		if err == nil && resp.Status == wire.StatusOK {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func valueResponse(v Value, err error) *wire.Response {
	if errors.Is(err, ErrNotFound) {
		return &wire.Response{Status: wire.StatusNotFound, Index: v.Revision}
	}
	if err != nil {
		return errResponse(err)
	}
	return &wire.Response{Status: wire.StatusOK, Value: v.Data, Version: v.Version, Terms: v.Index, Index: v.Revision}
}

func errResponse(err error) *wire.Response {
	var nl *replica.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &wire.Response{Status: wire.StatusNotLeader, Leader: nl.Leader}
	case errors.Is(err, ErrNotFound):
		return &wire.Response{Status: wire.StatusNotFound}
	case errors.Is(err, replica.ErrOverloaded):
		return &wire.Response{Status: wire.StatusOverloaded, Message: err.Error()}
	case errors.Is(err, replica.ErrBadCommand):
		return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
	case errors.Is(err, replica.ErrStopped):
		return &wire.Response{Status: wire.StatusStopping, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &wire.Response{Status: wire.StatusTimeout, Message: err.Error()}
	}
	return &wire.Response{Status: wire.StatusError, Message: err.Error()}
}
