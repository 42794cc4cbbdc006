package cluster

import (
	"errors"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
)

// withRoles returns ms with the given nodes made read replicas.
func withRoles(ms []Member, readers ...uint64) []Member {
	for i := range ms {
		if slices.Contains(readers, ms[i].ID) {
			ms[i].Role = ReadReplica
		}
	}
	return ms
}

// applyAll returns shards with the moves done, learner moves included.
func applyAll(shards []shard.Descriptor, moves []Move) []shard.Descriptor {
	var voterMoves []Move
	for _, mv := range moves {
		if !mv.Learner {
			voterMoves = append(voterMoves, mv)
		}
	}
	out := apply(shards, voterMoves)
	for i := range out {
		d := &out[i]
		d.Learners = slices.Clone(d.Learners)
		for _, mv := range moves {
			if mv.Shard != d.ID || !mv.Learner {
				continue
			}
			if mv.To != 0 {
				d.Learners = append(d.Learners, mv.To)
			} else {
				d.Learners = slices.DeleteFunc(d.Learners, func(n uint64) bool { return n == mv.From })
			}
			slices.Sort(d.Learners)
		}
		// A move's destination holding a learner replaces it.
		d.Learners = slices.DeleteFunc(d.Learners, func(n uint64) bool { return slices.Contains(d.Replicas, n) })
	}
	return out
}

// settle plans and applies rounds until the planner asks for nothing,
// checking the read-replica rules on every move; it returns the shards.
func settle(t *testing.T, in PlanInput, readers ...uint64) []shard.Descriptor {
	t.Helper()
	for round := 0; round < 200; round++ {
		moves := Plan(in)
		if len(moves) == 0 {
			return in.Shards
		}
		// (checkMoves knows moves with a destination only.)
		checkMoves(t, in, slices.DeleteFunc(slices.Clone(moves), func(mv Move) bool { return mv.To == 0 }))
		busy := map[uint64]int{}
		for _, mv := range moves {
			if !mv.Learner && slices.Contains(readers, mv.To) {
				t.Fatalf("round %d: move %+v puts a voter on read replica %d", round, mv, mv.To)
			}
			if mv.Learner && mv.To != 0 && !slices.Contains(readers, mv.To) {
				t.Fatalf("round %d: learner move %+v to a node that is no read replica", round, mv)
			}
			busy[mv.To]++
		}
		for n, b := range busy {
			if n != 0 && b > max(in.TransferLimit, 1) {
				t.Fatalf("round %d: node %d takes %d moves, limit %d", round, n, b, in.TransferLimit)
			}
		}
		in.Shards = applyAll(in.Shards, moves)
	}
	t.Fatal("the planner never settled")
	return nil
}

// A read replica joining a balanced cluster gets a learner of every shard
// and nothing else: no voter moves to it, none anywhere (its learners do
// not count for the replication factor nor the replica counts).
func TestPlanReadReplicaGetsLearnersOnly(t *testing.T) {
	in := PlanInput{Shards: boot(t, []uint64{1, 2, 3}, 16, 3), Members: withRoles(members(actives(1, 2, 3, 4)), 4),
		Replication: 3, TransferLimit: 2, MaxMoves: 8}
	first := Plan(in)
	if len(first) != 2 {
		t.Fatalf("first round %v: want 2 learner moves (transfer limit 2)", first)
	}
	for _, mv := range first {
		if !mv.Learner || mv.To != 4 || mv.From != 0 || mv.Reason != Learn {
			t.Fatalf("move %+v: want a learner added on node 4", mv)
		}
	}
	out := settle(t, in, 4)
	before := counts(in.Shards)
	after := counts(out)
	for _, d := range out {
		if !d.IsLearner(4) || d.IsVoter(4) || len(d.Replicas) != 3 {
			t.Errorf("shard %d: voters %v learners %v: want node 4 a learner, 3 voters", d.ID, d.Replicas, d.Learners)
		}
	}
	for n := range before {
		if before[n] != after[n] {
			t.Errorf("node %d voter count %d -> %d: a read replica moved voters", n, before[n], after[n])
		}
	}
}

// With a new voter node and a read replica joining together, voters are
// rebalanced over the voter nodes only and the read replica ends with
// learners.
func TestPlanBalancesVotersAroundReadReplica(t *testing.T) {
	in := PlanInput{Shards: boot(t, []uint64{1, 2, 3}, 16, 3), Members: withRoles(members(actives(1, 2, 3, 4, 5)), 5),
		Replication: 3, TransferLimit: 2, MaxMoves: 8}
	out := settle(t, in, 5)
	c := counts(out)
	if c[5] != 0 {
		t.Fatalf("read replica holds %d voters", c[5])
	}
	for _, n := range []uint64{1, 2, 3, 4} {
		if c[n] < 11 || c[n] > 13 {
			t.Errorf("node %d holds %d voters: want 12±1 (48 over 4 voter nodes), counts %v", n, c[n], c)
		}
	}
	for _, d := range out {
		if !d.IsLearner(5) {
			t.Errorf("shard %d: no learner on the read replica: %v", d.ID, d.Learners)
		}
	}
}

// A voter turned read replica gives its voters away (to voter nodes,
// replication kept), then gets a learner of every shard.
func TestPlanVoterTurnedReadReplica(t *testing.T) {
	in := PlanInput{Shards: boot(t, []uint64{1, 2, 3, 4}, 8, 3), Members: withRoles(members(actives(1, 2, 3, 4)), 3),
		Replication: 3, TransferLimit: 2, MaxMoves: 8}
	first := Plan(in)
	for _, mv := range first {
		if mv.Learner || mv.From != 3 || mv.Reason != Repair {
			t.Fatalf("move %+v: want node 3's voters moved away first", mv)
		}
	}
	out := settle(t, in, 3)
	for _, d := range out {
		if d.IsVoter(3) || !d.IsLearner(3) || len(d.Replicas) != 3 {
			t.Errorf("shard %d: voters %v learners %v", d.ID, d.Replicas, d.Learners)
		}
	}
}

// A dead voter's replicas are replaced on voter nodes, never on the
// read replica, and a shard short of a voter is not satisfied by a
// learner (in flight or done).
func TestPlanRepairSkipsReadReplica(t *testing.T) {
	shards := boot(t, []uint64{1, 2, 3, 4}, 8, 3)
	for i := range shards {
		shards[i].Learners = []uint64{5}
	}
	ms := members(map[uint64]State{1: Active, 2: Active, 3: Active, 4: Dead, 5: Active})
	in := PlanInput{Shards: shards, Members: withRoles(ms, 5), Replication: 3, TransferLimit: 8, MaxMoves: 16}
	out := settle(t, in, 5)
	for _, d := range out {
		if d.IsVoter(4) || d.IsVoter(5) || len(d.Replicas) != 3 || !d.IsLearner(5) {
			t.Errorf("shard %d: voters %v learners %v", d.ID, d.Replicas, d.Learners)
		}
	}
	// A shard with two voters and a learner add in flight elsewhere.
	short := boot(t, []uint64{1, 2, 3}, 2, 3)
	short[0].Replicas = []uint64{1, 2}
	in = PlanInput{Shards: short, Members: withRoles(members(actives(1, 2, 3, 4)), 4), Replication: 3, TransferLimit: 2, MaxMoves: 8,
		InFlight: []Move{{Shard: 2, To: 4, Learner: true, Reason: Learn}}}
	moves := Plan(in)
	if len(moves) == 0 || moves[0].Shard != 1 || moves[0].To != 3 || moves[0].Learner {
		t.Fatalf("moves %v: want shard 1's missing voter added on node 3", moves)
	}
}

// A read replica leaving (decommissioning or dead) has its learners
// removed; once it holds none, finishDecommissions can remove it.
func TestPlanRemovesLeavingReadReplicaLearners(t *testing.T) {
	for _, st := range []State{Decommissioning, Dead} {
		shards := boot(t, []uint64{1, 2, 3}, 4, 3)
		for i := range shards {
			shards[i].Learners = []uint64{4}
		}
		ms := members(map[uint64]State{1: Active, 2: Active, 3: Active, 4: st})
		in := PlanInput{Shards: shards, Members: withRoles(ms, 4), Replication: 3, TransferLimit: 2, MaxMoves: 8}
		moves := Plan(in)
		for _, mv := range moves {
			if !mv.Learner || mv.From != 4 || mv.To != 0 {
				t.Fatalf("%s: move %+v: want node 4's learners removed", st, mv)
			}
		}
		// A removal streams nothing: the transfer limit (2) does not hold
		// it back, alive or dead.
		if len(moves) != 4 {
			t.Fatalf("%s: %d moves %v, want 4", st, len(moves), moves)
		}
		out := settle(t, in, 4)
		for _, d := range out {
			if d.HasReplica(4) {
				t.Errorf("%s: shard %d still has node 4: %v %v", st, d.ID, d.Replicas, d.Learners)
			}
		}
	}
}

// A read replica turned voter (DropLearners) has all its learners
// removed, at once (a removal takes no transfer slot), and takes no voter
// while it holds any or keeps the mark; once the mark goes it gets its
// share of voters.
func TestPlanReadReplicaTurnedVoterDropsLearners(t *testing.T) {
	shards := boot(t, []uint64{1, 2, 3}, 16, 3)
	for i := range shards {
		shards[i].Learners = []uint64{4}
	}
	ms := members(actives(1, 2, 3, 4))
	for i := range ms {
		if ms[i].ID == 4 {
			ms[i].DropLearners = true
		}
	}
	in := PlanInput{Shards: shards, Members: ms, Replication: 3, TransferLimit: 2, MaxMoves: 8}
	moves := Plan(in)
	if len(moves) != 8 {
		t.Fatalf("moves %v: want 8 (MaxMoves) learner removals", moves)
	}
	for _, mv := range moves {
		if !mv.Learner || mv.From != 4 || mv.To != 0 || mv.Reason != Learn {
			t.Fatalf("move %+v: want node 4's learner removed", mv)
		}
	}
	// Two learners left next to voters (a learner add that landed after
	// set-role): removed; no voter moves to node 4 meanwhile.
	in.Shards = boot(t, []uint64{1, 2, 3}, 16, 3)
	in.Shards[3].Learners, in.Shards[9].Learners = []uint64{4}, []uint64{4}
	moves = Plan(in)
	if len(moves) != 2 || moves[0].Shard != in.Shards[3].ID || moves[1].Shard != in.Shards[9].ID {
		t.Fatalf("moves %v: want the 2 learners removed, nothing else", moves)
	}
	out := settle(t, in)
	if c := counts(out); c[4] != 0 {
		t.Fatalf("node 4 took %d voters while marked", c[4])
	}
	for _, d := range out {
		if d.HasReplica(4) {
			t.Fatalf("shard %d: voters %v learners %v", d.ID, d.Replicas, d.Learners)
		}
	}
	in.Shards, in.Members = out, members(actives(1, 2, 3, 4))
	if c := counts(settle(t, in)); c[4] != 12 {
		t.Fatalf("node 4 holds %d voters once unmarked, want 12 of 48", c[4])
	}
}

// A learner on a voter node (a move's destination catching up) is left
// alone, and a read replica's learners make no shard look under way.
func TestMovingLearners(t *testing.T) {
	d := shard.Descriptor{ID: 1, Replicas: []uint64{1, 2, 3}, Learners: []uint64{5}}
	if movingLearners(d, map[uint64]bool{5: true}) {
		t.Error("a read replica's learner taken for a move under way")
	}
	d.Learners = []uint64{4, 5}
	if !movingLearners(d, map[uint64]bool{5: true}) {
		t.Error("a move's learner not seen")
	}
	in := PlanInput{Shards: []shard.Descriptor{d}, Members: members(actives(1, 2, 3, 4)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
	if moves := Plan(in); len(moves) != 0 {
		t.Errorf("moves %v touch a shard whose learner is a voter node's", moves)
	}
}

func TestRoleTransitions(t *testing.T) {
	r := Bootstrap(map[uint64]string{1: "p1", 2: "p2", 3: "p3"})
	r, changed, err := r.JoinAs(4, "h4", "p4", ReadReplica)
	if err != nil || !changed {
		t.Fatalf("join as read replica: %v %v", changed, err)
	}
	if m, _ := r.Member(4); !m.ReadReplica() || r.CountVoters() != 3 {
		t.Fatalf("member %+v, voters %d", m, r.CountVoters())
	}
	// A retried join keeps the role; a bad role is refused.
	if _, changed, err := r.JoinAs(4, "h4", "p4", Voter); err != nil || changed {
		t.Fatalf("retried join: %v %v", changed, err)
	}
	if _, _, err := r.JoinAs(5, "h5", "p5", "reader"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad role: %v", err)
	}
	// A voter turned read replica must leave rf voters.
	if _, _, err := r.SetRole(1, ReadReplica, 3); !errors.Is(err, ErrTooFewNodes) {
		t.Fatalf("too few voters: %v", err)
	}
	// Decommissioning a read replica leaves the voters alone: allowed.
	if _, _, err := r.Decommission(4, 3); err != nil {
		t.Fatalf("decommission a read replica: %v", err)
	}
	r, changed, err = r.SetRole(4, Voter, 3)
	if m, _ := r.Member(4); err != nil || !changed || m.ReadReplica() || m.Role != "" || !m.DropLearners || r.CountVoters() != 4 {
		t.Fatalf("back to voter: %+v %v %v", m, changed, err)
	}
	// A read replica again keeps its learners; the mark goes.
	if again, _, err := r.SetRole(4, ReadReplica, 3); err != nil {
		t.Fatal(err)
	} else if m, _ := again.Member(4); !m.ReadReplica() || m.DropLearners {
		t.Fatalf("read replica again: %+v", m)
	}
	r, changed, err = r.LearnersDropped(4)
	if m, _ := r.Member(4); err != nil || !changed || m.DropLearners {
		t.Fatalf("learners dropped: %+v %v %v", m, changed, err)
	}
	if _, changed, err := r.LearnersDropped(4); err != nil || changed {
		t.Fatalf("learners dropped twice: %v %v", changed, err)
	}
	if _, _, err := r.SetRole(9, Voter, 3); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}
}
