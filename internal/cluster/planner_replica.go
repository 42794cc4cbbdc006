package cluster

// The planner's rules for read replicas (role.go):
//
//   - a read replica is never a move's destination for a voter, and the
//     voters it holds (a voter turned read replica by SetRole) move away
//     like a decommissioning node's (planner.leaving, planner.source);
//   - its learners do not count for the replication factor: the planner's
//     replica counts (held, count) list voters only;
//   - every active read replica gets a learner of every shard, one Learn
//     move (an AddReplica with learnerOnly, never promoted) at a time per
//     shard, under the same TransferLimit as other moves;
//   - the learners on a node that is decommissioning, dead or removed
//     are removed (a Repair move with Learner and To 0), whatever its
//     role: a read replica's, or one an interrupted move left on a voter
//     node (else a decommission would wait for it for good);
//   - the learners of a read replica turned voter (Member.DropLearners)
//     are removed (a Learn move with To 0), and it takes no voter until
//     they are gone (the balancer then clears the mark): else a learner
//     added after the role changed (a learner add in flight, or planned
//     from a record read just before) would stay on the node for good,
//     taken for a move's destination;
//   - a learner's removal streams nothing: it takes no transfer slot.
//
// A learner on any other voter node is left alone: it is a move's
// destination catching up (or one an interrupted move left, which that
// move finishes when run again). A shard with a move running or planned
// (taken) keeps its learners.

// learners plans the read replicas' learner additions and removals, after
// the repairs and within the same limits.
func (p *planner) learners() {
	for _, d := range p.in.Shards {
		for _, n := range d.Learners {
			if len(p.moves) >= p.max {
				return
			}
			if p.taken[d.ID] {
				continue
			}
			switch {
			case p.leavingState(n):
				p.addLearnerMove(Move{Shard: d.ID, From: n, Learner: true, Reason: Repair})
			case p.drop[n]:
				p.addLearnerMove(Move{Shard: d.ID, From: n, Learner: true, Reason: Learn})
			}
		}
	}
	for _, n := range p.readers {
		for _, d := range p.in.Shards {
			if len(p.moves) >= p.max || !p.free(n) {
				break
			}
			if p.taken[d.ID] || d.HasReplica(n) || p.held[d.ID][n] {
				continue
			}
			p.addLearnerMove(Move{Shard: d.ID, To: n, Learner: true, Reason: Learn})
		}
	}
}

// leavingState reports whether node n is decommissioning, dead or
// removed (whatever its role).
func (p *planner) leavingState(n uint64) bool {
	s := p.state[n]
	return s == Dead || s == Removed || s == Decommissioning
}

// addLearnerMove records a planned learner move: it takes the shard and
// the nodes' transfer slots but changes no voter count.
func (p *planner) addLearnerMove(mv Move) {
	p.moves = append(p.moves, mv)
	p.taken[mv.Shard] = true
	p.charge(mv)
}
