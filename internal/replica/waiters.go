package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cairn-db/cairn/internal/statemachine"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
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

// WaitApplied waits until the replica has applied index. It wakes at each
// apply (AppliedChanged), not on a timer: a reader waiting for another
// replica to catch up (replicas=3/3) is answered as soon as it has.
func (r *Replica) WaitApplied(ctx context.Context, index uint64) error {
	for {
		// The channel is taken before the check: an apply between the two
		// closes it.
		ch := r.AppliedChanged()
		if r.applied.Load() >= index {
			return nil
		}
		if r.stopped.Load() {
			return ErrStopped
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// replWaiter is a WaitReplicated call: it waits until n replicas' progress
// reaches index.
type replWaiter struct {
	index uint64
	n     int
	done  chan error
}

// WaitReplicated waits until at least n replicas (this leader included)
// have index durably in their logs, as the leader's progress shows. The
// replica checks its waiters whenever its round has stepped messages (a
// follower's acknowledgement moves its progress) and after its own log
// write, so the caller is woken by the acknowledgement itself.
func (r *Replica) WaitReplicated(ctx context.Context, index uint64, n int) error {
	if r.stopped.Load() {
		return ErrStopped
	}
	w := &replWaiter{index: index, n: n, done: make(chan error, 1)}
	r.mu.Lock()
	if r.stopped.Load() {
		// Stop sets the flag before it fails the waiters under the lock.
		r.mu.Unlock()
		return ErrStopped
	}
	if lead := r.mu.rn.BasicStatus().Lead; lead != r.cfg.NodeID {
		r.mu.Unlock()
		return &NotLeaderError{Leader: lead}
	}
	if r.replicatedLocked(index) >= n {
		r.mu.Unlock()
		return nil
	}
	r.mu.replWait = append(r.mu.replWait, w)
	r.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		r.mu.Lock()
		if i := slices.Index(r.mu.replWait, w); i >= 0 {
			r.mu.replWait = slices.Delete(r.mu.replWait, i, i+1)
		}
		r.mu.Unlock()
		select {
		case err := <-w.done: // answered meanwhile
			return err
		default:
		}
		return ctx.Err()
	}
}

// replicatedLocked counts the replicas whose progress reaches index.
func (r *Replica) replicatedLocked(index uint64) int {
	count := 0
	r.mu.rn.WithProgress(func(_ uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match >= index {
			count++
		}
	})
	return count
}

// resolveReplicatedLocked answers the WaitReplicated calls whose index has
// reached enough replicas.
func (r *Replica) resolveReplicatedLocked() {
	if len(r.mu.replWait) == 0 {
		return
	}
	kept := r.mu.replWait[:0]
	for _, w := range r.mu.replWait {
		if r.replicatedLocked(w.index) >= w.n {
			w.done <- nil
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.mu.replWait[len(kept):])
	r.mu.replWait = kept
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
	for _, w := range r.mu.held {
		w.finish(err)
	}
	r.mu.held, r.mu.heldFwd = nil, nil
	for _, w := range r.mu.replWait {
		w.done <- err
	}
	r.mu.replWait = nil
}

// readCtx names one ReadIndex round. The leader keeps one pending request
// per context and ignores a second with the same bytes, so the context
// must be unique across every replica that asks it: the node id, then the
// replica's round number (which starts at a random value, so a restarted
// node does not reuse one still pending).
func readCtx(node, id uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), node), id)
}
