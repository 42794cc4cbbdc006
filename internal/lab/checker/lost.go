package checker

import (
	"fmt"
	"sort"
)

// LostWrites returns the acknowledged writes (key -> value) that the
// cluster does not return after healing. read returns the value and
// whether it exists.
func LostWrites(acked map[string]string, read func(key string) (string, bool, error)) ([]string, error) {
	var lost []string
	for k, v := range acked {
		got, ok, err := read(k)
		if err != nil {
			return nil, fmt.Errorf("checker: reading %s: %w", k, err)
		}
		if !ok || got != v {
			lost = append(lost, k)
		}
	}
	sort.Strings(lost)
	return lost, nil
}

// ShardHash is one replica's fingerprint of a shard.
type ShardHash struct {
	Shard   uint64 `json:"shard"`
	Applied uint64 `json:"applied"`
	Hash    string `json:"hash"`
}

// Diverged compares the shard hashes reported by every node (node ->
// hashes) and lists the shards whose replicas at the same applied index
// disagree.
func Diverged(byNode map[int][]ShardHash) []string {
	type seen struct {
		node    int
		applied uint64
		hash    string
	}
	first := map[uint64]seen{}
	var bad []string
	nodes := make([]int, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	for _, n := range nodes {
		for _, h := range byNode[n] {
			f, ok := first[h.Shard]
			if !ok {
				first[h.Shard] = seen{n, h.Applied, h.Hash}
				continue
			}
			if f.hash != h.Hash {
				bad = append(bad, fmt.Sprintf("shard %d: node %d (applied %d) %s != node %d (applied %d) %s",
					h.Shard, f.node, f.applied, f.hash, n, h.Applied, h.Hash))
			}
		}
	}
	return bad
}
