package cluster

import (
	"fmt"

	"github.com/cairn-db/cairn/internal/shard"
)

// Role of a member: what kind of replicas it holds.
type Role string

const (
	// Voter members (the default; "" in records written before roles
	// existed) hold voting replicas placed by the balancer and count for
	// the replication factor.
	Voter Role = "voter"
	// ReadReplica members hold a non-voting learner replica of every
	// shard: they serve serializable and replicas=1/N reads locally,
	// never count towards a quorum nor the replication factor, and never
	// take a voter (docs/operations.md, "Read replicas").
	ReadReplica Role = "read-replica"
)

// ParseRole returns the role s names ("" is Voter).
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case "", Voter:
		return Voter, nil
	case ReadReplica:
		return ReadReplica, nil
	}
	return "", fmt.Errorf("%w: role %q: want voter or read-replica", ErrInvalid, s)
}

// RoleOf is the member's role, Voter when the record names none.
func (m Member) RoleOf() Role {
	if m.Role == "" {
		return Voter
	}
	return m.Role
}

// ReadReplica reports whether the member holds read replicas only.
func (m Member) ReadReplica() bool { return m.Role == ReadReplica }

// CountVoters returns the number of active members that may hold voters.
func (r Record) CountVoters() int {
	n := 0
	for _, m := range r.Members {
		if m.State == Active && !m.ReadReplica() {
			n++
		}
	}
	return n
}

// JoinAs is Join for a node of the given role. A retried join keeps the
// role the record has (SetRole changes it).
func (r Record) JoinAs(id uint64, httpAddr, peerAddr string, role Role) (Record, bool, error) {
	role, err := ParseRole(string(role))
	if err != nil {
		return r, false, err
	}
	_, existed := r.Member(id)
	out, changed, err := r.Join(id, httpAddr, peerAddr)
	if err != nil || existed || role == Voter {
		return out, changed, err
	}
	out.set(id, func(m *Member) { m.Role = role })
	return out, true, nil
}

// SetRole returns the record with member id in the given role. Turning a
// voter into a read replica needs rf other active voters left (ErrTooFewNodes)
// so its voting replicas can move away. A read replica turned voter is
// marked DropLearners: the balancer removes its learners, then places
// voters on it (planner_replica.go); turned read replica again, its
// learners are wanted and the mark goes.
func (r Record) SetRole(id uint64, role Role, rf int) (Record, bool, error) {
	role, err := ParseRole(string(role))
	if err != nil {
		return r, false, err
	}
	m, ok := r.Member(id)
	switch {
	case !ok:
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	case m.State.Gone():
		return r, false, fmt.Errorf("%w: node %d is %s", ErrRemoved, id, m.State)
	case m.RoleOf() == role:
		return r, false, nil
	case role == ReadReplica && m.State == Active && r.CountVoters()-1 < rf:
		return r, false, fmt.Errorf("%w: node %d becoming a read replica would leave %d voting nodes for replication %d; add a node first",
			ErrTooFewNodes, id, r.CountVoters()-1, rf)
	}
	out := r.Clone()
	out.set(id, func(m *Member) {
		m.Role = role
		m.DropLearners = role == Voter
		if role == Voter {
			m.Role = "" // the default, as records without roles have it
		}
	})
	return out, true, nil
}

// LearnersDropped returns the record with member id's DropLearners mark
// cleared (the balancer, once the node holds no learner); changed false
// when it has none.
func (r Record) LearnersDropped(id uint64) (Record, bool, error) {
	m, ok := r.Member(id)
	if !ok {
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	if !m.DropLearners {
		return r, false, nil
	}
	out := r.Clone()
	out.set(id, func(m *Member) { m.DropLearners = false })
	return out, true, nil
}

// stayingLearners is the set of the record's nodes whose learners are no
// move's destination: the read replicas, and the read replicas turned
// voters whose learners the balancer removes (DropLearners). A taking-over
// balancer takes theirs for no predecessor's move, so it removes the
// latter at once rather than after touchGrace.
func stayingLearners(r Record) map[uint64]bool {
	out := map[uint64]bool{}
	for _, m := range r.Members {
		if m.ReadReplica() || m.DropLearners {
			out[m.ID] = true
		}
	}
	return out
}

// movingLearners reports whether d has a learner that is not a read
// replica's (a move's destination catching up).
func movingLearners(d shard.Descriptor, readers map[uint64]bool) bool {
	for _, n := range d.Learners {
		if !readers[n] {
			return true
		}
	}
	return false
}

// shapeOf is d's voters and the learners that are not read replicas': an
// epoch change that leaves it alone touched read replicas' learners only
// (the balancer's own Learn moves, or set-role removing them).
func shapeOf(d shard.Descriptor, readers map[uint64]bool) string {
	var learners []uint64
	for _, n := range d.Learners {
		if !readers[n] {
			learners = append(learners, n)
		}
	}
	return fmt.Sprint(d.Replicas, learners)
}
