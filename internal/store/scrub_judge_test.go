package store

import (
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/wire"
)

func res(leaves ...uint64) wire.ScrubResult {
	return wire.ScrubResult{Root: rootOf(leaves), Leaves: leaves}
}

func TestJudgeFindsTheReplicaOutsideTheMajority(t *testing.T) {
	good, bad := res(1, 2, 3, 4), res(1, 2, 9, 4)
	voters := []uint64{1, 2, 3}
	cases := []struct {
		name     string
		self     uint64
		voters   []uint64
		results  map[uint64]wire.ScrubResult
		outcome  string
		leaves   []int
		minority []uint64
	}{
		{"all agree", 1, voters, map[uint64]wire.ScrubResult{1: good, 2: good, 3: good}, ScrubAgree, nil, nil},
		{"self corrupt", 2, voters, map[uint64]wire.ScrubResult{1: good, 2: bad, 3: good}, ScrubMismatch, []int{2}, []uint64{2}},
		{"a peer corrupt", 1, voters, map[uint64]wire.ScrubResult{1: good, 2: bad, 3: good}, ScrubAgree, nil, []uint64{2}},
		// Two of three agree even when the third did not answer.
		{"one peer silent, self corrupt", 2, voters, map[uint64]wire.ScrubResult{2: bad, 1: good, 3: good}, ScrubMismatch, []int{2}, []uint64{2}},
		{"one peer silent, agree", 1, voters, map[uint64]wire.ScrubResult{1: good, 3: good}, ScrubAgree, nil, nil},
		// One against one: no majority of the three voters.
		{"one peer silent, disagree", 1, voters, map[uint64]wire.ScrubResult{1: good, 2: bad}, ScrubInconclusive, nil, nil},
		{"all differ", 1, voters, map[uint64]wire.ScrubResult{1: good, 2: bad, 3: res(7)}, ScrubInconclusive, nil, nil},
		// A learner's or a stranger's answer is no vote.
		{"non-voters do not count", 1, voters, map[uint64]wire.ScrubResult{1: good, 2: bad, 4: bad, 5: bad}, ScrubInconclusive, nil, nil},
		{"two voters never outvote", 1, []uint64{1, 2}, map[uint64]wire.ScrubResult{1: good, 2: bad}, ScrubInconclusive, nil, nil},
		{"five voters, two corrupt", 4, []uint64{1, 2, 3, 4, 5}, map[uint64]wire.ScrubResult{1: good, 2: good, 3: good, 4: bad, 5: res(0)}, ScrubMismatch, []int{2}, []uint64{4, 5}},
	}
	for _, c := range cases {
		v := judge(c.self, c.voters, c.results)
		slices.Sort(v.minority)
		if v.outcome != c.outcome || !slices.Equal(v.leaves, c.leaves) || (c.outcome != ScrubInconclusive && !slices.Equal(v.minority, c.minority)) {
			t.Errorf("%s: got %s leaves %v minority %v, want %s %v %v", c.name, v.outcome, v.leaves, v.minority, c.outcome, c.leaves, c.minority)
		}
	}
}

func TestRootOfDependsOnEveryLeafAndItsPlace(t *testing.T) {
	a := rootOf([]uint64{1, 2, 3})
	for _, other := range [][]uint64{{1, 2, 4}, {2, 1, 3}, {1, 2}, {1, 2, 3, 0}} {
		if rootOf(other) == a {
			t.Errorf("rootOf(%v) == rootOf([1 2 3])", other)
		}
	}
}
