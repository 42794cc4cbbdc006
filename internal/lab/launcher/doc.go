// Package launcher starts and stops a local Cairn cluster: a set of
// `cairn serve` child processes on free (or given) loopback ports, each
// with its own data dir and log, for `cairn demo`, the chaos lab and the
// integration tests.
//
// Launch (or New, then StartAll and WaitReady) brings a cluster up;
// WaitReady returns once every running node names a running leader for
// every shard in GET /v1/cluster. Nodes are then stopped (SIGTERM, a
// bounded wait of Config.StopTimeout, then SIGKILL), killed (SIGKILL),
// paused (SIGSTOP/SIGCONT) and restarted on the same data dir and
// addresses by id (1-based). StopAll stops every node at once, each with
// its own bounded wait, so a node that ignores SIGTERM is killed after its
// bound and never holds up the others.
//
// The process layer (StartProcess, Process) is usable on its own for any
// child process.
//
// Hooks keep callers' concerns out of the launcher: Config.OnStart runs
// on every start with the new pid (the chaos lab moves the node into its
// cgroups there), Config.OnExit is told of exits the launcher did not
// cause, Config.Output redirects a node's output (the demo prefixes and
// prints it).
//
// A Cluster's methods are safe for concurrent use. Every node process is
// watched by one goroutine, which ends when the process exits.
package launcher
