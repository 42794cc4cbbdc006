package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3"
)

// Errors of membership changes.
var (
	// ErrBadChange: the change cannot be made (unknown shard, a node that
	// holds no replica, the last voter, from == to…). Not retried.
	ErrBadChange = errors.New("store: bad membership change")
	// ErrNoLeader: no leader of the shard could be reached before the
	// context ended.
	ErrNoLeader = errors.New("store: shard leader not reachable")
)

// Kinds of MemberChange.
const (
	ChangeMove   = 1 // replace From by To
	ChangeAdd    = 2 // add To (as a learner only with Learner)
	ChangeRemove = 3 // remove From
	ChangeSplit  = 4 // split the shard at its midpoint (split.go)
)

// MemberChange is one membership change of a shard, as KindMembers
// requests carry it.
type MemberChange struct {
	Kind     uint8
	Shard    uint64
	From, To uint64
	Learner  bool
}

// Marshal encodes c.
func (c MemberChange) Marshal() []byte {
	b := []byte{1, c.Kind, 0}
	if c.Learner {
		b[2] = 1
	}
	b = binary.AppendUvarint(b, c.Shard)
	b = binary.AppendUvarint(b, c.From)
	return binary.AppendUvarint(b, c.To)
}

// UnmarshalMemberChange decodes what Marshal produced.
func UnmarshalMemberChange(b []byte) (MemberChange, error) {
	var c MemberChange
	if len(b) < 3 || b[0] != 1 || b[1] < ChangeMove || b[1] > ChangeSplit || b[2] > 1 {
		return c, fmt.Errorf("%w: bad encoding", ErrBadChange)
	}
	c.Kind, c.Learner = b[1], b[2] == 1
	b = b[3:]
	for _, p := range []*uint64{&c.Shard, &c.From, &c.To} {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return c, fmt.Errorf("%w: bad encoding", ErrBadChange)
		}
		*p, b = v, b[n:]
	}
	if len(b) != 0 {
		return c, fmt.Errorf("%w: trailing bytes", ErrBadChange)
	}
	return c, nil
}

// MoveReplica replaces node from by node to in the shard: to is added as
// a learner (its empty replica created first), catches up (a snapshot
// streamed from a pinned engine snapshot, then the log), and is promoted
// while from is removed in one joint-consensus step (ConfChangeV2, left
// automatically). If from leads the shard, leadership is handed to
// another voter first. from may be dead. Each step is decided from the
// shard's applied configuration, so a move interrupted anywhere (a crash,
// a leader change, a timeout) is finished by calling MoveReplica again.
// It returns once from is gone and to is a voter.
//
// Any node may call it: when this node does not lead the shard it asks
// the leader (wire.KindMembers) and follows leader hints until ctx ends.
// Errors: ErrBadChange (not retried), ErrNoLeader, the context's error.
func (s *Store) MoveReplica(ctx context.Context, shardID, from, to uint64) error {
	if from == 0 || to == 0 || from == to {
		return fmt.Errorf("%w: move from %d to %d", ErrBadChange, from, to)
	}
	_, err := s.change(ctx, MemberChange{Kind: ChangeMove, Shard: shardID, From: from, To: to})
	return err
}

// AddReplica adds node to to the shard: as a learner that stays one with
// learnerOnly (a read replica), else promoted to voter once caught up;
// either way it returns once the new replica has caught up. Idempotent; forwarded to the leader like MoveReplica.
func (s *Store) AddReplica(ctx context.Context, shardID, to uint64, learnerOnly bool) error {
	if to == 0 {
		return fmt.Errorf("%w: add node 0", ErrBadChange)
	}
	_, err := s.change(ctx, MemberChange{Kind: ChangeAdd, Shard: shardID, To: to, Learner: learnerOnly})
	return err
}

// RemoveReplica removes node's replica (voter or learner) from the shard.
// A leader being removed hands leadership over first; the last voter is
// never removed. Idempotent; forwarded to the leader like MoveReplica.
func (s *Store) RemoveReplica(ctx context.Context, shardID, node uint64) error {
	if node == 0 {
		return fmt.Errorf("%w: remove node 0", ErrBadChange)
	}
	_, err := s.change(ctx, MemberChange{Kind: ChangeRemove, Shard: shardID, From: node})
	return err
}

// change runs c on the shard's leader, here or over the transport,
// following leader hints until it is done or ctx ends.
func (s *Store) change(ctx context.Context, c MemberChange) (shard.Descriptor, error) {
	if _, ok := s.Descriptor(c.Shard); !ok {
		return shard.Descriptor{}, fmt.Errorf("%w: unknown shard %d", ErrBadChange, c.Shard)
	}
	backoff := 10 * time.Millisecond
	var hint uint64
	next := 0
	lastErr := ErrNoLeader
	for {
		target := hint
		if target == 0 {
			if r := s.replica(c.Shard); r != nil && r.Leader() != 0 {
				target = r.Leader()
			} else if d, _ := s.Descriptor(c.Shard); len(d.Replicas) > 0 {
				target = d.Replicas[next%len(d.Replicas)]
				next++
			}
		}
		hint = 0
		var err error
		var child shard.Descriptor
		if target == s.cfg.NodeID {
			if c.Kind == ChangeSplit {
				child, err = s.runSplit(ctx, c.Shard)
			} else {
				err = s.runChange(ctx, c)
			}
		} else if target != 0 && s.tr != nil {
			child, err = s.remoteChange(ctx, target, c)
		} else {
			err = &replica.NotLeaderError{}
		}
		var nl *replica.NotLeaderError
		switch {
		case err == nil:
			return child, nil
		case errors.Is(err, ErrBadChange):
			return shard.Descriptor{}, err
		case errors.As(err, &nl):
			if nl.Leader != target {
				hint = nl.Leader
			}
			lastErr = err
		default:
			lastErr = err
		}
		if hint != 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return shard.Descriptor{}, fmt.Errorf("%w: shard %d: %v (last: %v)", ErrNoLeader, c.Shard, ctx.Err(), lastErr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// remoteChange asks node target to run c as the shard's leader; for a
// split it returns the new shard's descriptor.
func (s *Store) remoteChange(ctx context.Context, target uint64, c MemberChange) (shard.Descriptor, error) {
	var none shard.Descriptor
	req := &wire.Request{Kind: wire.KindMembers, Sender: s.cfg.NodeID, ShardID: c.Shard, Command: c.Marshal()}
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = dl.UnixNano()
	}
	resp, err := s.tr.Request(ctx, target, req)
	if err != nil {
		return none, err
	}
	switch resp.Status {
	case wire.StatusOK:
		v := resp.Value
		var child shard.Descriptor
		if c.Kind == ChangeSplit {
			var cb []byte
			if v, cb, err = unmarshalSplitResult(v); err != nil {
				return none, fmt.Errorf("store: node %d: %w", target, err)
			}
			if child, err = shard.UnmarshalDescriptor(cb); err != nil {
				return none, fmt.Errorf("store: node %d: %w", target, err)
			}
			s.LearnDescriptor(child)
		}
		if d, err := shard.UnmarshalDescriptor(v); err == nil && d.ID == c.Shard {
			s.LearnDescriptor(d)
		}
		return child, nil
	case wire.StatusNotLeader, wire.StatusNoReplica:
		return none, &replica.NotLeaderError{Leader: resp.Leader}
	case wire.StatusInvalid:
		return none, fmt.Errorf("%w: %s", ErrBadChange, resp.Message)
	}
	return none, fmt.Errorf("store: node %d: %s (status %d)", target, resp.Message, resp.Status)
}

// HandleMembers answers a wire.KindMembers request: it runs the change
// if this node leads the shard, else answers StatusNotLeader with a hint.
func (s *Store) HandleMembers(ctx context.Context, req *wire.Request) *wire.Response {
	c, err := UnmarshalMemberChange(req.Command)
	if err != nil || c.Shard != req.ShardID {
		return &wire.Response{Status: wire.StatusInvalid, Message: "bad membership change"}
	}
	var child shard.Descriptor
	if c.Kind == ChangeSplit {
		child, err = s.runSplit(ctx, c.Shard)
	} else {
		err = s.runChange(ctx, c)
	}
	var nl *replica.NotLeaderError
	switch {
	case err == nil:
		resp := &wire.Response{Status: wire.StatusOK}
		if d, ok := s.Descriptor(c.Shard); ok {
			resp.Value = d.Marshal() // the caller learns the result
		}
		if c.Kind == ChangeSplit {
			resp.Value = marshalSplitResult(resp.Value, child.Marshal())
		}
		return resp
	case errors.As(err, &nl):
		return &wire.Response{Status: wire.StatusNotLeader, Leader: nl.Leader}
	case errors.Is(err, ErrBadChange):
		return &wire.Response{Status: wire.StatusInvalid, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &wire.Response{Status: wire.StatusTimeout, Message: err.Error()}
	}
	return &wire.Response{Status: wire.StatusError, Message: err.Error()}
}

// HandleAdmin answers the store's own request kinds (KindCreateReplica,
// KindMembers, KindScrub); ok false for any other kind.
func (s *Store) HandleAdmin(ctx context.Context, req *wire.Request) (*wire.Response, bool) {
	switch req.Kind {
	case wire.KindCreateReplica:
		return s.handleCreate(req), true
	case wire.KindMembers:
		return s.HandleMembers(ctx, req), true
	case wire.KindScrub:
		return s.handleScrub(req), true
	}
	return nil, false
}

// stepWait bounds one wait of runChange for the applied configuration to
// change before it looks again.
const stepWait = 100 * time.Millisecond

// runChange drives c on the local replica while it leads the shard. Each
// round reads the applied configuration and takes the one step that
// brings it closer to c's goal (see nextStep), then waits for the
// descriptor to change; a *replica.NotLeaderError when the replica does
// not (or no longer) lead.
func (s *Store) runChange(ctx context.Context, c MemberChange) error {
	var lastCreate time.Time
	for {
		r := s.replica(c.Shard)
		if r == nil {
			var hint uint64
			if d, ok := s.Descriptor(c.Shard); ok && len(d.Replicas) > 0 {
				hint = d.Replicas[0]
			}
			return &replica.NotLeaderError{Leader: hint}
		}
		if !r.IsLeader() {
			return &replica.NotLeaderError{Leader: r.Leader()}
		}
		changed := r.DescChanged()
		epoch := r.Desc().Epoch
		st := r.Status()
		if st.RaftState != raft.StateLeader {
			return &replica.NotLeaderError{Leader: st.Lead}
		}
		step, err := nextStep(c, s.cfg.NodeID, st, r.LastIndex())
		if err != nil || step.done {
			return err
		}
		switch {
		case step.transfer != 0:
			s.cfg.Logger.Info("membership change: handing leadership over first", "shard", c.Shard, "to", step.transfer)
			r.TransferLeadership(step.transfer)
		case step.create != 0:
			if time.Since(lastCreate) > 2*time.Second {
				// The descriptor the replica will have once it is a
				// learner: the current one if it is already, else the
				// next (plus it as a learner, epoch + 1).
				d := r.Desc().Clone()
				if !d.HasReplica(step.create) {
					d.Epoch++
					d.Learners = append(d.Learners, step.create)
					slices.Sort(d.Learners)
				}
				if err := s.createRemote(ctx, step.create, d); err != nil {
					return err
				}
				lastCreate = time.Now()
			}
			if step.cc != nil {
				break
			}
		}
		if step.cc != nil {
			s.cfg.Logger.Info("membership change: proposing", "shard", c.Shard, "change", describeCC(*step.cc))
			err := r.ProposeConfChange(ctx, *step.cc, epoch)
			if err != nil && !errors.Is(err, replica.ErrStaleEpoch) {
				return err
			}
		}
		select {
		case <-changed:
		case <-time.After(stepWait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// peerPoll is how often createRemote looks for an unknown destination.
const peerPoll = 100 * time.Millisecond

// createRemote asks node to (or this node) to create the empty replica d
// describes.
func (s *Store) createRemote(ctx context.Context, to uint64, d shard.Descriptor) error {
	if to == s.cfg.NodeID {
		return s.CreateReplica(d)
	}
	if s.tr == nil {
		return fmt.Errorf("%w: no transport to reach node %d", ErrBadChange, to)
	}
	req := &wire.Request{Kind: wire.KindCreateReplica, Sender: s.cfg.NodeID, ShardID: d.ID, Command: d.Marshal()}
	resp, err := s.tr.Request(ctx, to, req)
	// A node that just joined may not be in this node's address book yet
	// (it reads the membership record about once a second): wait for it
	// (Config.PeerWait) before calling the destination unknown.
	for wait := time.Now().Add(s.cfg.PeerWait); errors.Is(err, transport.ErrUnknownPeer) && time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(peerPoll):
		}
		resp, err = s.tr.Request(ctx, to, req)
	}
	if errors.Is(err, transport.ErrUnknownPeer) {
		return fmt.Errorf("%w: node %d is not a known peer", ErrBadChange, to)
	}
	if err != nil {
		return fmt.Errorf("store: create replica of shard %d on node %d: %w", d.ID, to, err)
	}
	if resp.Status != wire.StatusOK {
		return fmt.Errorf("%w: node %d refused to create a replica of shard %d: %s", ErrBadChange, to, d.ID, resp.Message)
	}
	return nil
}
