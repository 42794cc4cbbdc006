package chaos

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/client"
)

func shards(ss ...client.ShardInfo) client.ClusterInfo {
	return client.ClusterInfo{Replication: 3, Shards: ss,
		Members: []client.MemberInfo{{NodeID: 1, State: "active"}, {NodeID: 2, State: "active"}, {NodeID: 3, State: "active"}, {NodeID: 4, State: "active"}}}
}

func sh(id uint64, leader uint64, voters ...uint64) client.ShardInfo {
	return client.ShardInfo{ID: id, Epoch: 1, Leader: leader, Replicas: voters}
}

func TestShareProblem(t *testing.T) {
	// 3 shards x 3 voters over 4 active nodes: a share of 2.
	one := shards(sh(1, 1, 1, 2, 4), sh(2, 2, 1, 2, 3), sh(3, 3, 1, 2, 3))
	if got := shareProblem(one, 4); !strings.Contains(got, "holds 1 replicas, its share is 2") {
		t.Errorf("one replica of a share of 2: %q", got)
	}
	two := shards(sh(1, 1, 1, 2, 4), sh(2, 2, 4, 2, 3), sh(3, 3, 1, 2, 3))
	if got := shareProblem(two, 4); got != "" {
		t.Errorf("two replicas: %q", got)
	}
	learning := two
	learning.Shards = append([]client.ShardInfo(nil), two.Shards...)
	learning.Shards[2].Learners = []uint64{4}
	if got := shareProblem(learning, 4); !strings.Contains(got, "learners") {
		t.Errorf("a move in flight (a learner): %q", got)
	}
	joint := shards(sh(1, 1, 1, 2, 4), sh(2, 2, 4, 2, 3), sh(3, 3, 4, 2, 3, 1))
	if got := shareProblem(joint, 4); !strings.Contains(got, "4 voters") {
		t.Errorf("a move in flight (joint): %q", got)
	}
}

func TestDrainProblem(t *testing.T) {
	ci := shards(sh(1, 2, 2, 3, 4), sh(2, 2, 2, 3, 4))
	if got := drainProblem(ci, 1); !strings.Contains(got, "still a member") {
		t.Errorf("no replica but still listed: %q", got)
	}
	ci.Members = ci.Members[1:]
	if got := drainProblem(ci, 1); got != "" {
		t.Errorf("drained and gone: %q", got)
	}
	ci.Shards[1].Learners = []uint64{1}
	if got := drainProblem(ci, 1); !strings.Contains(got, "shards 2") {
		t.Errorf("still a learner of shard 2: %q", got)
	}
	ci.Shards[1].Learners = nil
	ci.Shards[0].Replicas = []uint64{1, 3, 4}
	if got := drainProblem(ci, 1); !strings.Contains(got, "shards 1") {
		t.Errorf("still a voter of shard 1: %q", got)
	}
}

func TestReplicationProblem(t *testing.T) {
	live := map[uint64]bool{1: true, 3: true, 4: true} // 2 is dead
	ok := shards(sh(1, 1, 1, 3, 4), sh(2, 3, 4, 3, 1))
	if got := replicationProblem(ok, live, 3); got != "" {
		t.Errorf("full: %q", got)
	}
	for name, ci := range map[string]client.ClusterInfo{
		"a voter on the dead node": shards(sh(1, 1, 1, 3, 4), sh(2, 3, 2, 3, 1)),
		"two voters":               shards(sh(1, 1, 1, 3, 4), sh(2, 3, 3, 1)),
		"a repeated voter":         shards(sh(1, 1, 1, 3, 3)),
		"no shard":                 shards(),
	} {
		if got := replicationProblem(ci, live, 3); got == "" {
			t.Errorf("%s: no problem found", name)
		}
	}
}

func TestPlacementProblems(t *testing.T) {
	live := map[uint64]bool{1: true, 2: true, 3: true, 4: true}
	view := func(node uint64, ss ...client.ShardInfo) client.ClusterInfo {
		ci := shards(ss...)
		ci.NodeID = node
		return ci
	}
	// Shard 1 moved from node 1 to node 4 (epoch 4); node 1 still shows
	// the old descriptor it had when it was killed.
	moved := sh(1, 2, 4, 2, 3)
	moved.Epoch = 4
	views := map[uint64]client.ClusterInfo{
		1: view(1, sh(1, 1, 1, 2, 3)), // stale: names itself leader at epoch 1
		2: view(2, moved),
		3: view(3, moved),
		4: view(4, moved),
	}
	held := map[uint64][]uint64{2: {1}, 3: {1}, 4: {1}}
	if got := placementProblems(views, held, live); len(got) != 0 {
		t.Errorf("matching: %v", got)
	}
	held[1] = []uint64{1} // the removed replica is still on node 1
	if got := placementProblems(views, held, live); len(got) != 1 || !strings.Contains(got[0], "outside the descriptor on node(s) 1") {
		t.Errorf("an orphan on node 1: %v", got)
	}
	delete(held, 1)
	held[4] = nil // the destination lost its replica
	if got := placementProblems(views, held, live); len(got) != 1 || !strings.Contains(got[0], "no replica on node(s) 4") {
		t.Errorf("a voter without its replica: %v", got)
	}
	held[4] = []uint64{1}
	down := map[uint64]bool{1: true, 2: true}
	if got := placementProblems(map[uint64]client.ClusterInfo{2: views[2]}, held, down); len(got) == 0 || !strings.Contains(got[0], "no quorum") {
		t.Errorf("two of three voters down: %v", got)
	}
	if got := placementProblems(map[uint64]client.ClusterInfo{3: views[3]}, held, live); len(got) != 1 || !strings.Contains(got[0], "no live node leads") {
		t.Errorf("no leader's view: %v", got)
	}
}

// A read replica's learners are no move in flight, and a read replica is
// no active node sharing the voters.
func TestShareProblemWithAReadReplica(t *testing.T) {
	two := shards(sh(1, 1, 1, 2, 4), sh(2, 2, 4, 2, 3), sh(3, 3, 1, 2, 3))
	two.Members = append(two.Members, client.MemberInfo{NodeID: 5, State: "active", Role: "read-replica"})
	for i := range two.Shards {
		two.Shards[i].Learners = []uint64{5}
	}
	if got := shareProblem(two, 4); got != "" {
		t.Errorf("node 4 holds its share next to a read replica's learners: %q", got)
	}
	two.Shards[0].Learners = []uint64{5, 3}
	if got := shareProblem(two, 4); !strings.Contains(got, "learners") {
		t.Errorf("a voter node's learner next to a read replica's: %q, want a move in flight", got)
	}
}

func TestReadReplicaProblem(t *testing.T) {
	ci := shards(sh(1, 1, 1, 2, 3), sh(2, 2, 1, 2, 3))
	ci.Members = append(ci.Members, client.MemberInfo{NodeID: 5, State: "active", Role: "read-replica"})
	if got := readReplicaProblem(ci, 5); !strings.Contains(got, "no learner of shard 1") {
		t.Errorf("no learner yet: %q", got)
	}
	for i := range ci.Shards {
		ci.Shards[i].Learners = []uint64{5}
	}
	if got := readReplicaProblem(ci, 5); got != "" {
		t.Errorf("a learner of every shard: %q", got)
	}
	ci.Shards[1].Replicas = []uint64{1, 2, 5}
	if got := readReplicaProblem(ci, 5); !strings.Contains(got, "voter of shard 2") {
		t.Errorf("a voter on the read replica: %q", got)
	}
	if got := readReplicaProblem(ci, 4); !strings.Contains(got, "not read-replica") {
		t.Errorf("a voter node: %q", got)
	}
}
