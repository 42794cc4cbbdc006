// Package chaos runs fault-injection experiments against a real cluster of
// `cairn serve` processes on 127.0.0.1: it records a client workload
// (reads, writes, compare-and-sets on a few keys, plus an append-only set of
// unique writes), injects faults at a shard leader, a follower or a named
// node (kill -9 and restart, SIGSTOP, cgroup CPU quota, cgroup memory limit,
// partitions and disk stalls through the nodes' fault hook), heals, and
// checks the history: linearizability per key (porcupine), acknowledged
// writes lost, replicas diverged. Runs are bounded in time and stop by
// themselves; every process they start is stopped at the end.
package chaos
