// Package replicatest is a deterministic harness for replicas: it drives
// the replicas of one shard step by step, in the style of etcd raft's
// interaction tests, from datadriven scripts (testdata/*.txt, golden
// output rewritten with `go test -rewrite`).
//
// Determinism. The harness runs no goroutine of its own and the replicas
// run none either: every Ready round (Stage, commit of the batch, Finish),
// every message delivery and every tick happens inside a command. Raft
// counts ticks, and the harness ticks by hand. Proposals and reads block
// their caller, so each runs in a goroutine of a synctest bubble (an Env
// must be used inside synctest.Test); after each step the harness calls
// synctest.Wait, so it knows exactly which of them have an answer before
// it prints anything. Time comes from a manual monotonic clock: it is
// every replica's Config.Clock (plus a per-node skew), which leaders stamp
// entries with and which so drives the shard clock that ages dedup
// records; raft's time is ticks. Randomized choices (the
// order of `deliver-msgs random`, the unsynced blocks a partial crash
// keeps) are drawn from one seeded source: the tests use seed 1 (the
// golden outputs) unless -seed or $CAIRN_HARNESS_SEED says otherwise; with
// another seed a script runs for its invariants only, and a failure
// prints the seed. Raft's own election timeouts are randomized with no
// way to seed them: scripts elect with `campaign`, `transfer-leadership`
// or `tick-election` (which stops as soon as the node campaigns), never
// by ticking followers blindly.
//
// Storage. Each node's engine lives on its own in-memory filesystem
// (storage.NewCrashableFS; the harness imports no Pebble package), the
// staging folder of received snapshots included. `crash` keeps only what
// was fsync'd (CrashClone),
// stops the replica (its waiters get replica.ErrStopped) and reopens it
// from what survived. Pebble treats a failed write or fsync of its log as
// fatal (the engine panics), so a disk error is a crash mid-round:
// `stage n` then `crash n`.
//
// Delivery. A message goes through what the store does with a peer's
// message: store.CheckMessage, then Replica.Step (whose round drops
// messages naming impossible log positions before raft steps them). A
// MsgSnap is streamed as the store streams it: the sender opens the
// engine snapshot its raft pinned (Replica.OpenSnapshot, chunks of 64
// bytes here) and the receiver spills the chunks to sstables and hands
// raft the MsgSnap once the stream is whole (Replica.ReceiveSnapshot, in
// a goroutine of the bubble, as the transport's handler runs); the sender
// learns the outcome (ReportSnapshot) when the receiver is done, printed
// as "snapshot 1->3 snap=6/12 (6 chunks, 426 bytes): installed".
// A round that dropped messages before raft prints "nN: dropped K peer
// messages"; a message the store's check refuses prints "refused".
//
// Checks. Every vote request, vote grant, append answer and heartbeat
// answer is checked when it is sent against what a crash of its sender at
// that instant would leave (step 2 of the Ready contract); a linearizable
// read must see every write acknowledged before it began. A broken
// invariant prints a VIOLATION line and fails the test; so does a panic.
//
// Commands (node ids are bare numbers: `process-ready 1 2`):
//
//	add-nodes n=3 [election=10] [heartbeat=1] [truncate-threshold=N]
//	    [truncate-keep=N] [truncate-bytes=N] [dedup-ttl=2m]
//	    [cut-past-down=1] [lease=720ms]
//	                           bootstrap voters 1..n of shard 1 (the
//	                           harness's defaults never truncate)
//	campaign <n>               start an election at n, run its round
//	transfer-leadership from=<n> to=<m>
//	propose <n> key=k value=v [id=reqid] [delete] [if-absent] [if-match=ver]
//	                           a write at n (request id "op<N>" if unset)
//	read <n> key=k [forward]   a linearizable read (ReadIndex, or
//	                           ReadIndexForward), then the key at n
//	process-ready [n...]       one round per node (all if none)
//	stage <n> / finish <n>     the halves of a round: after stage the
//	                           batch is uncommitted and the replica locked;
//	                           finish commits (fsync if asked) and finishes
//	stabilize                  rounds and deliveries until nothing moves
//	                           (no ticks; held messages stay)
//	deliver-msgs [from=] [to=] [type=App] [count=] [random] [held]
//	drop-snapshot [from=] [to=] [after=1]
//	                           stream the MsgSnaps in flight but break
//	                           each stream after that many chunks
//	drop-msgs [from=] [to=] [type=] [count=] [held]
//	hold [from=] [to=] [type=] / release [...]
//	                           delay messages in flight / let them go
//	msgs                       list the messages in flight
//	inject from= to= type=Heartbeat term= [logterm=] [index=] [commit=]
//	                           deliver a forged message (no entries)
//	partition 1 / 2 3, heal    cut / restore links (a message on a cut
//	                           link is lost at send or delivery, and its
//	                           sender told)
//	tick <n> [count=1] [pending], tick-heartbeat <n>, tick-election <n>
//	                           (pending: the ticks pile up and one round
//	                           steps them all, as after a slow round)
//	crash <n...> | crash all [percent=P]
//	advance-clock d=30s        move the manual monotonic clock
//	clock-skew <n> d=1h        node n's clock reads d ahead from now on
//	elapse d=2m [step=5s]      advance the clock step by step, stabilizing
//	                           after each (leaders stamp); prints only
//	                           finished operations, violations, and the
//	                           shard clocks at the end
//	get [n...] key=k, status [n...], ops, check-consistency
//	leader-lost [n...]         each node's published leader and LeaderLost
//	dedup [n...]               the shard clock and the dedup groups per
//	                           bucket (bucket:groups)
//	staging [n...]             files in the engine's snapshot staging folder
//	add-node <n>               a new node holding an empty learner replica
//	                           (what a move creates on its destination)
//	conf-change <n> [add-learner=4] [add=4] [remove=3] [joint[=explicit]]
//	    [leave]                propose a ConfChangeV2 at n (joint: auto
//	                           leave, joint=explicit: left by `leave`)
//	desc [n...]                each node's descriptor: epoch, voters,
//	                           learners, joint, removed
//
// Output: each round prints "nN ready: persist [sync]", the messages it
// sends, the node's state line when it changed, and the operations it
// answered ("op 3 done: ok version=7 index=7 created").
package replicatest
