package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/wire"
)

// Result of an applied write.
type Result = statemachine.Result

type proposal struct {
	reqID string
	// fp is the command's fingerprint: an applied command answers the
	// proposals of its request id and fingerprint only.
	fp   uint64
	key  []byte // the command's key: an entry holds one command per key
	data []byte
	done chan proposalResult
	// forward: a follower may hand it to the leader (ProposeForward).
	forward bool
	// abandoned: its caller stopped waiting; it is not proposed.
	abandoned atomic.Bool
}

type proposalResult struct {
	res Result
	err error
}

func (p *proposal) finish(res Result, err error) {
	select {
	case p.done <- proposalResult{res, err}:
	default:
	}
}

type waiter struct {
	index uint64
	done  chan error
	// forward: a follower may ask the leader for the index (ReadIndexForward).
	forward bool
}

func (w *waiter) finish(err error) {
	select {
	case w.done <- err:
	default:
	}
}

// Propose replicates cmd through raft and waits until it is applied,
// returning its result. Only the leader accepts proposals; others return a
// *NotLeaderError. The command's RequestID must be set. When ctx ends first
// the command may still commit later.
func (r *Replica) Propose(ctx context.Context, cmd *wire.Command) (Result, error) {
	return r.ProposeEncoded(ctx, cmd.RequestID, cmd.Key, cmd.Marshal())
}

// ProposeEncoded is Propose for a command already encoded (data must be
// cmd.Marshal() of a command with this request id and key); it saves a
// re-encoding on the forwarding path.
func (r *Replica) ProposeEncoded(ctx context.Context, reqID, key, data []byte) (Result, error) {
	return r.propose(ctx, reqID, key, data, false)
}

// ProposeForward is ProposeEncoded that a follower accepts too: it hands
// the command to the leader inside the Raft message stream (raft's
// proposal forwarding, as etcd does) and answers once this replica has
// applied it — every replica computes the same result. This saves a
// request to the leader. A forwarded proposal can be dropped on the way
// (the leader is transferring leadership, a message is lost): the caller
// bounds its wait and retries under the same request id. When the leader
// or term changes first, it fails with a *NotLeaderError.
func (r *Replica) ProposeForward(ctx context.Context, reqID, key, data []byte) (Result, error) {
	return r.propose(ctx, reqID, key, data, true)
}

func (r *Replica) propose(ctx context.Context, reqID, key, data []byte, forward bool) (Result, error) {
	if r.stopped.Load() {
		return Result{}, ErrStopped
	}
	if lead := r.Leader(); lead != r.cfg.NodeID && (!forward || lead == 0) {
		return Result{}, &NotLeaderError{Leader: lead}
	}
	var cmd wire.Command
	if err := cmd.Unmarshal(data); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	p := &proposal{reqID: string(reqID), fp: cmd.Fingerprint(), key: key, data: data, done: make(chan proposalResult, 1), forward: forward}
	r.in.Lock()
	if r.in.pending >= r.cfg.MaxPending {
		r.in.Unlock()
		return Result{}, ErrOverloaded
	}
	r.in.pending++
	r.in.props = append(r.in.props, p)
	r.in.Unlock()
	if c := r.cfg.PendingWrites; c != nil {
		c.Add(1)
		defer c.Add(-1)
	}
	r.cfg.Enqueue(r.id)
	defer r.release()
	select {
	case pr := <-p.done:
		return pr.res, pr.err
	case <-ctx.Done():
		r.abandon(p)
		return Result{}, ctx.Err()
	}
}

// abandon forgets a proposal whose caller gave up, so one that never
// applies (dropped on its way to the leader) does not stay registered.
func (r *Replica) abandon(p *proposal) {
	p.abandoned.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.mu.props[p.reqID]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(r.mu.props, p.reqID)
	} else {
		r.mu.props[p.reqID] = ps
	}
}

// ReadIndex confirms leadership with a quorum (batched with concurrent
// reads into one raft ReadIndex) and waits until the local state machine
// has applied everything committed before the call; it returns that index.
// A read of the engine after it returns is linearizable.
func (r *Replica) ReadIndex(ctx context.Context) (uint64, error) {
	return r.readIndex(ctx, false)
}

// ReadIndexForward is ReadIndex that a follower serves too, as etcd does:
// it asks the leader for its commit index inside the Raft stream (the
// leader confirms its leadership with a quorum first) and waits until this
// replica has applied up to that index, so a read of the local engine
// after it returns is linearizable. The request can be dropped on its way
// (a leadership transfer, a lost message): the caller bounds its wait.
func (r *Replica) ReadIndexForward(ctx context.Context) (uint64, error) {
	return r.readIndex(ctx, true)
}

func (r *Replica) readIndex(ctx context.Context, forward bool) (uint64, error) {
	if r.stopped.Load() {
		return 0, ErrStopped
	}
	if lead := r.Leader(); lead != r.cfg.NodeID && (!forward || lead == 0) {
		return 0, &NotLeaderError{Leader: lead}
	}
	w := &waiter{done: make(chan error, 1), forward: forward}
	r.in.Lock()
	if r.in.pending >= r.cfg.MaxPending {
		r.in.Unlock()
		return 0, ErrOverloaded
	}
	r.in.pending++
	r.in.reads = append(r.in.reads, w)
	r.in.Unlock()
	r.cfg.Enqueue(r.id)
	defer r.release()
	select {
	case err := <-w.done:
		return w.index, err
	case <-ctx.Done():
		if forward {
			r.abandonRead(w)
		}
		return 0, ctx.Err()
	}
}

// abandonRead forgets a read whose caller gave up, so one whose request
// was dropped on its way to the leader does not stay registered.
func (r *Replica) abandonRead(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, rd := range r.mu.readBatch {
		if i := slices.Index(rd.waiters, w); i >= 0 {
			rd.waiters = slices.Delete(rd.waiters, i, i+1)
			if len(rd.waiters) == 0 {
				delete(r.mu.readBatch, id)
			}
			return
		}
	}
	if i := slices.Index(r.mu.applyWait, w); i >= 0 {
		r.mu.applyWait = slices.Delete(r.mu.applyWait, i, i+1)
	}
}

func (r *Replica) release() {
	r.in.Lock()
	r.in.pending--
	r.in.Unlock()
}

// WaitApplied waits until the replica has applied index.
func (r *Replica) WaitApplied(ctx context.Context, index uint64) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for r.applied.Load() < index {
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

// WaitReplicated waits until at least n replicas (this leader included)
// have index durably in their logs, as the leader's progress shows.
func (r *Replica) WaitReplicated(ctx context.Context, index uint64, n int) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		st := r.Status()
		if st.Lead != r.cfg.NodeID {
			return &NotLeaderError{Leader: st.Lead}
		}
		count := 0
		for _, pr := range st.Progress {
			if pr.Match >= index {
				count++
			}
		}
		if count >= n {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// failAllLocked fails every pending proposal and read (leadership lost).
func (r *Replica) failAllLocked(err error) {
	for k, ps := range r.mu.props {
		for _, p := range ps {
			p.finish(Result{}, err)
		}
		delete(r.mu.props, k)
	}
	for k, rd := range r.mu.readBatch {
		for _, w := range rd.waiters {
			w.finish(err)
		}
		delete(r.mu.readBatch, k)
	}
	for _, w := range r.mu.applyWait {
		w.finish(err)
	}
	r.mu.applyWait = nil
}

// readCtx names one ReadIndex round. The leader keeps one pending request
// per context and ignores a second with the same bytes, so the context
// must be unique across every replica that asks it: the node id, then the
// replica's round number (which starts at a random value, so a restarted
// node does not reuse one still pending).
func readCtx(node, id uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), node), id)
}
