package chaos

import (
	"fmt"
	"sort"
	"time"
)

// Scenario is a named fault schedule.
type Scenario struct {
	Name        string
	Description string
	Cgroups     bool // needs a writable cgroup hierarchy
	// Etcd: the workload's clients speak the etcd API (etcdload.go).
	Etcd bool
	// MinDuration is the shortest run that fits the schedule.
	MinDuration time.Duration
	Steps       func(d time.Duration) []Step
	// Preload and Shards are the run's preloaded records and shard count
	// unless --preload or --shards say otherwise (0: none, one per node).
	Preload int64
	Shards  int
	// HoldLoad: the load runs until every step has healed (a step that
	// waits for the cluster to finish its work does so under load),
	// however long that takes past the run's duration.
	HoldLoad bool
	// Leases is the run's lease workers (WorkloadConfig.Leases; an Etcd
	// scenario's); 0: none.
	Leases int
}

// one schedules a single fault starting a quarter into the run (at least
// 5 s, so a baseline exists) and lasting up to 10 s.
func one(f Fault, target string) func(time.Duration) []Step {
	return func(d time.Duration) []Step {
		return Schedule{At: max(5*time.Second, d/4), For: min(10*time.Second, d/3), Repeat: 1}.Steps(f, target)
	}
}

// series schedules faults one after another, 8 s each with 4 s gaps.
func series(target string, fs ...Fault) func(time.Duration) []Step {
	return func(d time.Duration) []Step {
		var out []Step
		at := 6 * time.Second
		for _, f := range fs {
			out = append(out, Step{Fault: f, Target: target, At: at, For: 8 * time.Second})
			at += 12 * time.Second
		}
		return out
	}
}

// Scenarios lists every scenario by name.
var Scenarios = map[string]Scenario{
	"leader-kill":         {Description: "kill -9 the leader of shard 1, restart it 10 s later", MinDuration: 20 * time.Second, Steps: one(killFault{}, "leader")},
	"follower-kill":       {Description: "kill -9 a follower of shard 1, restart it 10 s later", MinDuration: 20 * time.Second, Steps: one(killFault{}, "follower")},
	"leader-pause":        {Description: "SIGSTOP the leader of shard 1 for 10 s", MinDuration: 20 * time.Second, Steps: one(pauseFault{}, "leader")},
	"partition-leader":    {Description: "isolate the leader of shard 1 from every other node for 10 s", MinDuration: 20 * time.Second, Steps: one(partitionFault{}, "leader")},
	"partition-split":     {Description: "cut a minority with the leader of shard 1 from the majority for 10 s (1 vs 2 nodes; 2 vs 3 with --nodes 5)", MinDuration: 20 * time.Second, Steps: one(splitFault{}, "leader")},
	"disk-stall-leader":   {Description: "delay every storage commit of the leader of shard 1 by 1 s, for 10 s", MinDuration: 20 * time.Second, Steps: one(diskStallFault{time.Second}, "leader")},
	"clock-skew-leader":   {Description: "the clocks of the leader of shard 1 run 2 minutes ahead for 10 s, then step back", MinDuration: 20 * time.Second, Steps: one(clockFault{by: 2 * time.Minute}, "leader")},
	"clock-skew-follower": {Description: "the clocks of a follower of shard 1 run 2 minutes ahead for 10 s, then step back", MinDuration: 20 * time.Second, Steps: one(clockFault{by: 2 * time.Minute}, "follower")},
	"clock-jump-leader":   {Description: "the clocks of the leader of shard 1 jump 2 minutes ahead mid-run and stay there", MinDuration: 20 * time.Second, Steps: one(clockFault{by: 2 * time.Minute, jump: true}, "leader")},
	"corrupt-follower":    {Description: "stop a follower of shard 1, invert every value of one of its replicas (checksums intact), restart it: its scrub must find the replica outside the majority and replace it by a snapshot, with no changed value ever read", MinDuration: 25 * time.Second, Steps: one(corruptFault{}, "follower")},
	"disk-full-leader":    {Description: "the disk of the leader of shard 1 is full for 10 s (its disk guard answers new values with 507 and hands its leaderships away)", MinDuration: 20 * time.Second, Steps: one(diskFullFault{}, "leader")},
	"clock-jump-partition": {Description: "the clocks of the leader of shard 1 jump 2 minutes ahead, then it is isolated for 6 s (writes in flight to it are retried elsewhere under their request ids)", MinDuration: 25 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: clockFault{by: 2 * time.Minute, jump: true}, Target: "leader", At: 5 * time.Second, For: time.Second},
				{Fault: partitionFault{}, Target: "leader", At: 8 * time.Second, For: 6 * time.Second}}
		}},
	"rolling-restart": {Description: "restart every node in turn (SIGTERM, 3 s down)", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			var out []Step
			for i := 1; i <= 3; i++ {
				out = append(out, Step{Fault: restartFault{}, Target: fmt.Sprint("node:", i), At: time.Duration(i) * 7 * time.Second, For: 3 * time.Second})
			}
			return out
		}},
	"slow-cpu-leader":   {Description: "cgroup CPU quota of 0.2, 0.1, 0.05 core on the leader of shard 1", Cgroups: true, MinDuration: 45 * time.Second, Steps: series("leader", cgroupFault{cpu: 0.2}, cgroupFault{cpu: 0.1}, cgroupFault{cpu: 0.05})},
	"slow-cpu-follower": {Description: "cgroup CPU quota of 0.2, 0.1, 0.05 core on a follower of shard 1", Cgroups: true, MinDuration: 45 * time.Second, Steps: series("follower", cgroupFault{cpu: 0.2}, cgroupFault{cpu: 0.1}, cgroupFault{cpu: 0.05})},
	"memory-leader":     {Description: "cgroup memory limit of 512, 256, 128 MB on the leader of shard 1", Cgroups: true, MinDuration: 45 * time.Second, Steps: series("leader", cgroupFault{memory: 512 << 20}, cgroupFault{memory: 256 << 20}, cgroupFault{memory: 128 << 20})},
	"memory-follower":   {Description: "cgroup memory limit of 512, 256, 128 MB on a follower of shard 1", Cgroups: true, MinDuration: 45 * time.Second, Steps: series("follower", cgroupFault{memory: 512 << 20}, cgroupFault{memory: 256 << 20}, cgroupFault{memory: 128 << 20})},
	"backup-leader-kill": {Description: "kill -9 the leader of shard 1 and at once take a hot backup through another node (restarting the leader 10 s later), then another backup through any node; each backup, restored into a fresh cluster, must hold every write acknowledged before it started", MinDuration: 25 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: backupFault{kill: true}, Target: "leader", At: 5 * time.Second, For: 10 * time.Second},
				{Fault: backupFault{}, Target: "random", At: max(d-5*time.Second, 18*time.Second), For: time.Second}}
		}},
	"add-node": {Description: "a 4th node joins through node 1 under load (cairn serve --join); the balancer moves a share of the replicas onto it; the checks run as usual and the run reports its share", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			at := max(5*time.Second, d/4) // a steady baseline before the join
			return []Step{{Fault: &joinFault{}, Target: "node:1", At: at, For: max(d-at-5*time.Second, 20*time.Second)}}
		}},
	"read-replica": {Description: "a 4th node joins through node 1 under load with --role read-replica and must get a non-voting learner of every shard and no voter; then the leader of shard 1 is killed with -9 and restarted; then it must still hold them, and writes acknowledged through a voter are read back from it with serializable reads served by its own learners; its lag is reported", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: &readReplicaFault{}, Target: "node:1", At: 5 * time.Second, For: 5 * time.Second},
				{Fault: killFault{}, Target: "leader", At: 12 * time.Second, For: 5 * time.Second},
				{Fault: readReplicaReads{}, Target: "node:1", At: max(d-8*time.Second, 19*time.Second), For: 3 * time.Second}}
		}},
	"decommission": {Description: "a 4th node joins, then node 1 is decommissioned under load (the admin call) and drains: it must end with no replica, out of the members, and exit", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: &decommissionFault{}, Target: "node:1", At: 5 * time.Second, For: max(d-10*time.Second, 20*time.Second)}}
		}},
	"replace-dead": {Description: "kill -9 a follower of shard 1, declare it dead (node remove --dead) and join a new node: every shard must get its full replica count back on live nodes", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: &replaceDeadFault{}, Target: "follower", At: 5 * time.Second, For: max(d-10*time.Second, 20*time.Second)}}
		}},
	"kill-during-move": {Description: "move the replica of shard 1 on its leader to a new node (rebalancing off, snapshots at 256 KiB/s), kill -9 the source as soon as the learner is added and the destination 1 s later, restart both: the move finishes or rolls back, every shard keeps a quorum and its replicas match its descriptor", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: &killMoveFault{}, Target: "leader", At: 5 * time.Second, For: 10 * time.Second}}
		}},
	"elastic": {Description: "issue 14's acceptance run: 100 000 records of 1 KiB on 12 shards under load; a 4th node joins and must hold its share of the replicas (within one) within 5 minutes, then serve a read of every record; then node 1 is decommissioned and must drain, leave and exit while the load runs; every client error fails the run; the load runs until the drain ends",
		MinDuration: 40 * time.Second, Preload: 100_000, Shards: 12, HoldLoad: true,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: &elasticJoinFault{}, Target: "node:1", At: 10 * time.Second, For: time.Second},
				{Fault: &elasticDrainFault{}, Target: "node:1", At: 11 * time.Second, For: time.Second}}
		}},
	"split": {Description: "split shards repeatedly under load (POST /v1/admin/shards/{id}/split, the widest shard each time, through node 1, 2, 3 in turn, 6 splits 3 s apart; the fourth while node 2 is down after a kill -9, restarted 5 s later); the new halves start on the same replicas with no data copied, writes in flight are retried on the right half, and the killed node applies the split it missed from its log", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			var out []Step
			at := 5 * time.Second
			for i := 0; i < 6; i++ {
				f, target, hold := shardSplitFault{}, fmt.Sprint("node:", i%3+1), time.Second
				if i == 3 {
					f, target, hold = shardSplitFault{kill: true}, "node:2", 5*time.Second
				}
				out = append(out, Step{Fault: f, Target: target, At: at, For: hold})
				at += hold + 2*time.Second
			}
			return out
		}},
	"leader-kill-partition": {Description: "kill -9 the leader of shard 1, then isolate the new leader (the short run of make test)", MinDuration: 30 * time.Second,
		Steps: func(d time.Duration) []Step {
			return []Step{{Fault: killFault{}, Target: "leader", At: 5 * time.Second, For: 6 * time.Second},
				{Fault: partitionFault{}, Target: "leader", At: 15 * time.Second, For: 6 * time.Second}}
		}},
}

// Names lists the scenarios in a stable order.
func Names() []string {
	var out []string
	for n := range Scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() {
	for n, s := range Scenarios {
		s.Name = n
		Scenarios[n] = s
	}
}
