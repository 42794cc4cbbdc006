package store

import (
	"github.com/cairn-db/cairn/internal/wire"
)

// Outcomes of comparing one replica's scrub result with its peers'.
const (
	// ScrubAgree: the replica's root is the majority's.
	ScrubAgree = "agree"
	// ScrubMismatch: a majority of the voters agree on another root.
	ScrubMismatch = "mismatch"
	// ScrubInconclusive: no root is held by a majority of the voters
	// (peers did not answer in time, or they disagree among themselves).
	ScrubInconclusive = "inconclusive"
	// ScrubRepaired: after a mismatch, the replica was replaced by a
	// snapshot of the leader.
	ScrubRepaired = "repaired"
)

// verdict is judge's finding.
type verdict struct {
	outcome string
	// agree: the voters (self included) holding the majority root, or the
	// most common one when there is no majority.
	agree int
	// leaves: the sub-ranges where self differs from the majority.
	leaves []int
	// minority: the voters whose roots differ from the majority's.
	minority []uint64
}

// judge compares self's scrub result with those of the shard's voters at
// the same scrub (results holds self's and every peer that answered). A
// root wins when more than half of all voters — not of those that
// answered — hold it, so a replica is only called bad when a majority of
// the shard agree with one another and not with it. With fewer than
// three voters no root can outvote another, and nothing is judged bad.
func judge(self uint64, voters []uint64, results map[uint64]wire.ScrubResult) verdict {
	count := map[uint64]int{}
	for _, v := range voters {
		if r, ok := results[v]; ok {
			count[r.Root]++
		}
	}
	var best uint64
	bestN := 0
	for root, n := range count {
		if n > bestN || n == bestN && root < best {
			best, bestN = root, n
		}
	}
	v := verdict{agree: bestN}
	mine, ok := results[self]
	if bestN*2 <= len(voters) || len(voters) < 3 || !ok {
		v.outcome = ScrubInconclusive
		return v
	}
	for _, id := range voters {
		if r, ok := results[id]; ok && r.Root != best {
			v.minority = append(v.minority, id)
		}
	}
	if mine.Root == best {
		v.outcome = ScrubAgree
		return v
	}
	v.outcome = ScrubMismatch
	// Name the differing sub-ranges against a replica of the majority.
	for _, id := range voters {
		if r, ok := results[id]; ok && r.Root == best {
			for i := range min(len(r.Leaves), len(mine.Leaves)) {
				if r.Leaves[i] != mine.Leaves[i] {
					v.leaves = append(v.leaves, i)
				}
			}
			break
		}
	}
	return v
}

// rootOf is the root hash of a replica's leaves.
func rootOf(leaves []uint64) uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a over the leaves' bytes
	for _, l := range leaves {
		for i := 0; i < 8; i++ {
			h ^= (l >> (8 * i)) & 0xff
			h *= 1099511628211
		}
	}
	return h
}
