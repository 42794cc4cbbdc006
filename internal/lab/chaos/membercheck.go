package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-db/cairn/client"
)

// The end-state checks of the membership scenarios. Each takes what nodes
// answered (GET /v1/cluster, GET /v1/admin/hashes) and says what is wrong
// ("" or none: nothing).

// moving says which shard of ci is in the middle of a change (a learner
// other than a read replica's, or more voters than the replication
// factor: a joint configuration), or "".
func moving(ci client.ClusterInfo) string {
	readers := map[uint64]bool{}
	for _, m := range ci.Members {
		if m.Role == "read-replica" {
			readers[m.NodeID] = true
		}
	}
	for _, s := range ci.Shards {
		for _, n := range s.Learners {
			if !readers[n] {
				return fmt.Sprintf("shard %d has learners %v", s.ID, s.Learners)
			}
		}
		if ci.Replication > 0 && len(s.Replicas) > ci.Replication {
			return fmt.Sprintf("shard %d has %d voters %v for replication %d", s.ID, len(s.Replicas), s.Replicas, ci.Replication)
		}
	}
	return ""
}

// shareProblem says why node does not hold its share of the replicas in
// ci: at least the voters of every shard divided by the active members,
// rounded down, with no change in flight. "": it does.
func shareProblem(ci client.ClusterInfo, node uint64) string {
	if m := moving(ci); m != "" {
		return m
	}
	voters, held, active := 0, 0, 0
	for _, s := range ci.Shards {
		voters += len(s.Replicas)
		if s.HasReplica(node) {
			held++
		}
	}
	for _, m := range ci.Members {
		if (m.State == "" || m.State == "active") && m.Role != "read-replica" {
			active++ // a read replica holds no voter
		}
	}
	if active == 0 {
		return "no active member"
	}
	if want := voters / active; held < want {
		return fmt.Sprintf("node %d holds %d replicas, its share is %d (%d voters, %d active nodes)", node, held, want, voters, active)
	}
	return ""
}

// drainProblem says why node has not left the cluster in ci: it is still
// a voter or a learner of a shard, or still listed among the members. "":
// it left.
func drainProblem(ci client.ClusterInfo, node uint64) string {
	var in []string
	for _, s := range ci.Shards {
		if s.HasReplica(node) || slices.Contains(s.Learners, node) {
			in = append(in, fmt.Sprint(s.ID))
		}
	}
	if len(in) > 0 {
		return fmt.Sprintf("node %d still holds replicas of shards %s", node, strings.Join(in, ","))
	}
	for _, m := range ci.Members {
		if m.NodeID == node {
			return fmt.Sprintf("node %d is still a member (%s)", node, m.State)
		}
	}
	return ""
}

// replicationProblem says which shard of ci lacks its full replica count
// on live nodes: rf distinct voters, all live, no change in flight. "":
// every shard has it.
func replicationProblem(ci client.ClusterInfo, live map[uint64]bool, rf int) string {
	if m := moving(ci); m != "" {
		return m
	}
	if len(ci.Shards) == 0 {
		return "no shard listed"
	}
	for _, s := range ci.Shards {
		seen := map[uint64]bool{}
		n := 0
		for _, r := range s.Replicas {
			if live[r] && !seen[r] {
				n++
			}
			seen[r] = true
		}
		if n != rf || len(s.Replicas) != rf {
			return fmt.Sprintf("shard %d has %d voters %v, %d of them on live nodes; want %d", s.ID, len(s.Replicas), s.Replicas, n, rf)
		}
	}
	return ""
}

// placementProblems checks every shard against its leader's descriptor:
// a live node leads it (the view of a node that names itself leader and
// is a voter), a majority of its voters are live, and the live nodes that
// hold a replica of it (held: node -> shards, from their hashes) are
// exactly its live voters and learners. views are the live nodes' views
// by node id; live the live nodes.
func placementProblems(views map[uint64]client.ClusterInfo, held map[uint64][]uint64, live map[uint64]bool) []string {
	shards := map[uint64]bool{}
	lead := map[uint64]client.ShardInfo{}
	for node, ci := range views {
		for _, s := range ci.Shards {
			shards[s.ID] = true
			if s.Leader == node && s.HasReplica(node) {
				if old, ok := lead[s.ID]; !ok || s.Epoch > old.Epoch {
					lead[s.ID] = s
				}
			}
		}
	}
	ids := make([]uint64, 0, len(shards))
	for id := range shards {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		d, ok := lead[id]
		if !ok {
			out = append(out, fmt.Sprintf("shard %d: no live node leads it", id))
			continue
		}
		up := 0
		for _, r := range d.Replicas {
			if live[r] {
				up++
			}
		}
		if up <= len(d.Replicas)/2 {
			out = append(out, fmt.Sprintf("shard %d: %d of its voters %v are live, no quorum", id, up, d.Replicas))
		}
		want := map[uint64]bool{}
		for _, r := range append(append([]uint64(nil), d.Replicas...), d.Learners...) {
			if live[r] {
				want[r] = true
			}
		}
		var missing, extra []string
		for node := range live {
			has := slices.Contains(held[node], id)
			switch {
			case want[node] && !has:
				missing = append(missing, fmt.Sprint(node))
			case !want[node] && has:
				extra = append(extra, fmt.Sprint(node))
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("shard %d (epoch %d, voters %v, learners %v): no replica on node(s) %s", id, d.Epoch, d.Replicas, d.Learners, strings.Join(missing, ",")))
		}
		if len(extra) > 0 {
			out = append(out, fmt.Sprintf("shard %d (epoch %d, voters %v, learners %v): a replica outside the descriptor on node(s) %s", id, d.Epoch, d.Replicas, d.Learners, strings.Join(extra, ",")))
		}
	}
	return out
}
