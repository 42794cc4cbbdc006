package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/shard"
)

// members builds a member list from "id:state" pairs.
func members(states map[uint64]State) []Member {
	var out []Member
	for id, s := range states {
		out = append(out, Member{ID: id, PeerAddr: fmt.Sprintf("p%d", id), State: s})
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out
}

func actives(ids ...uint64) map[uint64]State {
	m := map[uint64]State{}
	for _, id := range ids {
		m[id] = Active
	}
	return m
}

// boot is n shards over nodes with rf replicas, as a new cluster has them.
func boot(t *testing.T, nodes []uint64, n, rf int) []shard.Descriptor {
	t.Helper()
	m, err := shard.Bootstrap(nodes, n, rf)
	if err != nil {
		t.Fatal(err)
	}
	return m.Shards
}

// apply returns shards with the moves done.
func apply(shards []shard.Descriptor, moves []Move) []shard.Descriptor {
	out := make([]shard.Descriptor, len(shards))
	for i, d := range shards {
		d.Replicas = slices.Clone(d.Replicas)
		for _, mv := range moves {
			if mv.Shard != d.ID {
				continue
			}
			// As a move does: the new replica takes the old one's slot.
			if i := slices.Index(d.Replicas, mv.From); mv.From != 0 && i >= 0 {
				d.Replicas[i] = mv.To
			} else {
				d.Replicas = append(d.Replicas, mv.To)
			}
		}
		out[i] = d
	}
	return out
}

// counts is each node's replica count.
func counts(shards []shard.Descriptor) map[uint64]int {
	c := map[uint64]int{}
	for _, d := range shards {
		for _, n := range d.Replicas {
			c[n]++
		}
	}
	return c
}

// checkMoves asserts the invariants every plan keeps.
func checkMoves(t *testing.T, in PlanInput, moves []Move) {
	t.Helper()
	state := map[uint64]State{}
	for _, m := range in.Members {
		state[m.ID] = m.State
	}
	limit := max(in.TransferLimit, 1)
	busy := map[uint64]int{}
	shards := map[uint64]bool{}
	for _, mv := range in.InFlight {
		shards[mv.Shard] = true
		busy[mv.To]++
		if s := state[mv.From]; mv.From != 0 && (s == Active || s == Decommissioning) {
			busy[mv.From]++
		}
	}
	if len(moves) > max(in.MaxMoves, 1) {
		t.Errorf("%d moves planned, MaxMoves %d", len(moves), in.MaxMoves)
	}
	after := apply(in.Shards, append(slices.Clone(in.InFlight), moves...))
	for _, mv := range moves {
		if state[mv.To] != Active {
			t.Errorf("move %+v targets node %d in state %q", mv, mv.To, state[mv.To])
		}
		if shards[mv.Shard] {
			t.Errorf("move %+v: shard %d already has a move", mv, mv.Shard)
		}
		shards[mv.Shard] = true
		busy[mv.To]++
		if s := state[mv.From]; mv.From != 0 && (s == Active || s == Decommissioning) {
			busy[mv.From]++
		}
	}
	for n, b := range busy {
		if b > limit {
			t.Errorf("node %d takes part in %d moves, limit %d", n, b, limit)
		}
	}
	for _, d := range after {
		seen := map[uint64]bool{}
		for _, n := range d.Replicas {
			if seen[n] {
				t.Errorf("shard %d has two replicas on node %d: %v", d.ID, n, d.Replicas)
			}
			seen[n] = true
		}
	}
}

func TestPlanTable(t *testing.T) {
	three := []uint64{1, 2, 3}
	tests := []struct {
		name  string
		in    func(t *testing.T) PlanInput
		check func(t *testing.T, in PlanInput, moves []Move)
	}{
		{
			name: "balanced cluster plans nothing",
			in: func(t *testing.T) PlanInput {
				return PlanInput{Shards: boot(t, three, 16, 3), Members: members(actives(1, 2, 3)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 0 {
					t.Fatalf("moves %v on a balanced cluster", moves)
				}
			},
		},
		{
			name: "new node receives balance moves up to the transfer limit",
			in: func(t *testing.T) PlanInput {
				return PlanInput{Shards: boot(t, three, 16, 3), Members: members(actives(1, 2, 3, 4)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 2 {
					t.Fatalf("want 2 moves (node 4's transfer limit), got %v", moves)
				}
				for _, mv := range moves {
					if mv.To != 4 || mv.Reason != Balance {
						t.Errorf("move %+v: want a balance move to node 4", mv)
					}
				}
			},
		},
		{
			name: "dead node's replicas are repaired before any balancing",
			in: func(t *testing.T) PlanInput {
				st := actives(1, 2, 4, 5)
				st[3] = Dead
				return PlanInput{Shards: boot(t, three, 6, 3), Members: members(st), Replication: 3, TransferLimit: 4, MaxMoves: 16}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) == 0 {
					t.Fatal("no repair planned")
				}
				for _, mv := range moves {
					if mv.Reason != Repair || mv.From != 3 {
						t.Errorf("move %+v: want only repairs off node 3", mv)
					}
				}
			},
		},
		{
			name: "no target for a dead node's replicas when every active node holds the shard",
			in: func(t *testing.T) PlanInput {
				st := actives(1, 2)
				st[3] = Dead
				return PlanInput{Shards: boot(t, three, 4, 3), Members: members(st), Replication: 3, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 0 {
					t.Fatalf("moves %v with no node to take them", moves)
				}
			},
		},
		{
			name: "under-replicated shard gets a replica added",
			in: func(t *testing.T) PlanInput {
				sh := boot(t, three, 3, 3)
				sh[1].Replicas = sh[1].Replicas[:2]
				return PlanInput{Shards: sh, Members: members(actives(1, 2, 3)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, in PlanInput, moves []Move) {
				if len(moves) != 1 || moves[0].From != 0 || moves[0].Shard != in.Shards[1].ID || moves[0].Reason != Repair {
					t.Fatalf("want one add to shard %d, got %v", in.Shards[1].ID, moves)
				}
				if slices.Contains(in.Shards[1].Replicas, moves[0].To) {
					t.Fatalf("added on a node already holding it: %v", moves)
				}
			},
		},
		{
			name: "decommissioning node is drained, never a target",
			in: func(t *testing.T) PlanInput {
				st := actives(2, 3, 4)
				st[1] = Decommissioning
				return PlanInput{Shards: boot(t, []uint64{1, 2, 3, 4}, 8, 3), Members: members(st), Replication: 3, TransferLimit: 1, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 1 {
					t.Fatalf("want 1 move (node 1's transfer limit 1), got %v", moves)
				}
				if moves[0].From != 1 || moves[0].Reason != Repair {
					t.Fatalf("want a repair off node 1, got %v", moves)
				}
			},
		},
		{
			name: "shards with fewest healthy replicas are repaired first",
			in: func(t *testing.T) PlanInput {
				st := actives(1, 4, 5)
				st[2], st[3] = Dead, Dead
				sh := []shard.Descriptor{
					{ID: 1, Replicas: []uint64{1, 2, 4}},
					{ID: 2, Replicas: []uint64{1, 2, 3}}, // one healthy
					{ID: 3, Replicas: []uint64{1, 4, 5}},
				}
				return PlanInput{Shards: sh, Members: members(st), Replication: 3, TransferLimit: 1, MaxMoves: 1}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 1 || moves[0].Shard != 2 {
					t.Fatalf("want shard 2 (one healthy replica) first, got %v", moves)
				}
			},
		},
		{
			name: "in-flight moves block their shard and count against the limit",
			in: func(t *testing.T) PlanInput {
				sh := boot(t, three, 8, 3)
				fl := []Move{{Shard: sh[0].ID, From: sh[0].Replicas[0], To: 4, Reason: Balance}}
				return PlanInput{Shards: sh, Members: members(actives(1, 2, 3, 4)), Replication: 3, InFlight: fl, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, in PlanInput, moves []Move) {
				if len(moves) != 1 || moves[0].To != 4 || moves[0].Shard == in.Shards[0].ID {
					t.Fatalf("want one more move to node 4 on another shard, got %v", moves)
				}
			},
		},
		{
			name: "a running repair holds back balancing",
			in: func(t *testing.T) PlanInput {
				sh := boot(t, three, 8, 3)
				sh[0].Replicas = sh[0].Replicas[:2]
				fl := []Move{{Shard: sh[0].ID, From: 0, To: 4, Reason: Repair}}
				return PlanInput{Shards: sh, Members: members(actives(1, 2, 3, 4)), Replication: 3, InFlight: fl, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				if len(moves) != 0 {
					t.Fatalf("balance moves %v while a repair runs", moves)
				}
			},
		},
		{
			name: "nodes in no member record are left alone",
			in: func(t *testing.T) PlanInput {
				return PlanInput{Shards: boot(t, []uint64{1, 2, 3, 9}, 8, 3), Members: members(actives(1, 2, 3)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
			},
			check: func(t *testing.T, _ PlanInput, moves []Move) {
				for _, mv := range moves {
					if mv.From == 9 || mv.To == 9 {
						t.Errorf("move %+v touches unknown node 9", mv)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in(t)
			moves := Plan(in)
			checkMoves(t, in, moves)
			tt.check(t, in, moves)
		})
	}
}

// converge runs plans, applying each round's moves, until a plan is empty.
func converge(t *testing.T, in PlanInput) ([]shard.Descriptor, int) {
	t.Helper()
	for round := 0; round < 1000; round++ {
		moves := Plan(in)
		checkMoves(t, in, moves)
		if len(moves) == 0 {
			return in.Shards, round
		}
		in.Shards = apply(in.Shards, moves)
	}
	t.Fatal("plans did not converge in 1000 rounds")
	return nil, 0
}

func TestPlanConverges(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for trial := 0; trial < 200; trial++ {
		nodes := 3 + rng.IntN(6)
		rf := 1 + rng.IntN(min(nodes, 5))
		shards := 1 + rng.IntN(40)
		var ids []uint64
		for i := 1; i <= nodes; i++ {
			ids = append(ids, uint64(i))
		}
		boots := ids[:max(rf, 1+rng.IntN(nodes))]
		sh := boot(t, boots, shards, rf)
		st := actives(ids...)
		// Some nodes leave (dead or decommissioning) if enough stay.
		for _, n := range ids {
			if len(activeOf(st))-1 >= rf && rng.IntN(4) == 0 {
				st[n] = []State{Dead, Decommissioning, Removed}[rng.IntN(3)]
			}
		}
		in := PlanInput{Shards: sh, Members: members(st), Replication: rf, TransferLimit: 1 + rng.IntN(3), MaxMoves: 1 + rng.IntN(8)}
		final, rounds := converge(t, in)
		c := counts(final)
		lo, hi := 1<<30, 0
		for _, n := range activeOf(st) {
			lo, hi = min(lo, c[n]), max(hi, c[n])
		}
		for n, k := range c {
			if st[n] != Active && k > 0 {
				t.Fatalf("trial %d (seed %d): node %d (%s) still holds %d replicas", trial, seed, n, st[n], k)
			}
		}
		for _, d := range final {
			if len(d.Replicas) != rf {
				t.Fatalf("trial %d (seed %d): shard %d has %d replicas, want %d", trial, seed, d.ID, len(d.Replicas), rf)
			}
		}
		if hi-lo > 1 {
			t.Fatalf("trial %d (seed %d): replica counts %v not even after %d rounds", trial, seed, c, rounds)
		}
	}
}

func activeOf(st map[uint64]State) []uint64 {
	var out []uint64
	for n, s := range st {
		if s == Active {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// A fourth node ends with a quarter of the replicas, in moves bounded by
// the transfer limit.
func TestPlanFourthNodeTakesItsShare(t *testing.T) {
	in := PlanInput{Shards: boot(t, []uint64{1, 2, 3}, 16, 3), Members: members(actives(1, 2, 3, 4)), Replication: 3, TransferLimit: 2, MaxMoves: 8}
	final, rounds := converge(t, in)
	c := counts(final)
	if c[4] != 12 {
		t.Fatalf("node 4 holds %d of 48 replicas, want 12 (counts %v)", c[4], c)
	}
	if rounds < 6 {
		t.Fatalf("converged in %d rounds: the transfer limit (2 into node 4) was not respected", rounds)
	}
	// Preferred leaders (first slots) even out too: 16 shards over 4
	// nodes, 4 each, give or take one.
	pref := map[uint64]int{}
	for _, d := range final {
		pref[d.Replicas[0]]++
	}
	for n := uint64(1); n <= 4; n++ {
		if pref[n] < 3 || pref[n] > 5 {
			t.Fatalf("node %d is the preferred leader of %d shards, want 3 to 5 (%v)", n, pref[n], pref)
		}
	}
}
