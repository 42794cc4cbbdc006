package replicatest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
)

// Stage starts a Ready round at node: the replica drains its inbox and,
// if it has a Ready, stages its writes into a batch the harness holds
// (the leader sends its messages now). The replica stays locked until
// Finish; messages can still be delivered to its inbox meanwhile.
func (e *Env) Stage(id uint64) (bool, error) {
	nd, err := e.node(id)
	if err != nil {
		return false, err
	}
	if nd.staged != nil {
		return false, fmt.Errorf("%w: n%d", ErrStaged, id)
	}
	b := nd.Engine.NewBatch()
	mark := len(e.lines)
	e.indent = "  "
	nd.busy = true
	rr, sync := nd.Replica.Stage(b)
	e.indent = ""
	if d := nd.Replica.DroppedMessages(); d > nd.dropped {
		e.printf("n%d: dropped %d peer messages before raft (impossible log positions)", id, d-nd.dropped)
		nd.dropped = d
	}
	if rr == nil {
		nd.busy = false
		b.Close()
		nd.printStatus()
		// The round may have discarded a received snapshot raft refused:
		// its stream ends now.
		e.settle()
		return false, nil
	}
	persist := "persist"
	if sync {
		persist += " sync"
	}
	if b.Empty() {
		persist = "nothing to persist"
	}
	e.lines = slices.Insert(e.lines, mark, fmt.Sprintf("n%d ready: %s", id, persist))
	nd.staged = &stagedRound{b: b, rr: rr, sync: sync}
	return true, nil
}

// Finish commits the node's staged batch (synced if the Ready asked for
// it) and completes the round: send, apply, resolve, advance.
func (e *Env) Finish(id uint64) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	s := nd.staged
	if s == nil {
		return fmt.Errorf("%w: n%d has no staged round", ErrBadCommand, id)
	}
	nd.staged = nil
	if err := s.b.Commit(s.sync); err != nil {
		// The store panics here; the harness restarts the node instead.
		e.printf("n%d: persist failed: %v", id, err)
		nd.staged = &stagedRound{b: nd.Engine.NewBatch(), rr: s.rr}
		return e.Crash(id, 0)
	}
	e.indent = "  "
	nd.Replica.Finish(s.rr)
	nd.busy = false
	nd.printStatus()
	e.settle()
	e.indent = ""
	return nil
}

// ProcessReady runs one whole round (Stage, commit, Finish) at node.
func (e *Env) ProcessReady(id uint64) (bool, error) {
	ok, err := e.Stage(id)
	if !ok || err != nil {
		return ok, err
	}
	return true, e.Finish(id)
}

// Stabilize runs rounds on every node (but those with a staged round)
// and delivers every message in flight, until nothing is left to do.
func (e *Env) Stabilize() error {
	for i := 0; i < 10000; i++ {
		progressed := false
		for _, id := range e.ids {
			if e.nodes[id].staged != nil {
				continue
			}
			ok, err := e.ProcessReady(id)
			if err != nil {
				return err
			}
			progressed = progressed || ok
		}
		if msgs := e.take(msgFilter{}, -1, false); len(msgs) > 0 {
			e.deliver(msgs, -1)
			progressed = true
		}
		if !progressed {
			return nil
		}
	}
	return fmt.Errorf("%w: stabilize did not settle", ErrBadCommand)
}

// Tick advances node's logical clock by n ticks, running a round after
// each.
func (e *Env) Tick(id uint64, n int) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		nd.Replica.Tick()
		if _, err := e.ProcessReady(id); err != nil {
			return err
		}
	}
	return nil
}

// TickOneRound gives a replica n ticks and then runs one round: a round
// that was slow (a long fsync, a busy CPU) finds the ticks that piled up
// meanwhile, and steps them all at once.
func (e *Env) TickOneRound(id uint64, n int) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		nd.Replica.Tick()
	}
	_, err = e.ProcessReady(id)
	return err
}

// TickElection ticks a follower until its election timeout passes and it
// campaigns (the timeout is randomized by raft, so the count varies, but
// the outcome does not), or a leader for one election timeout (its
// quorum check).
func (e *Env) TickElection(id uint64) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	et := e.electionTick()
	if nd.Replica.Status().RaftState == raft.StateLeader {
		return e.Tick(id, et)
	}
	for i := 0; i < 2*et; i++ {
		if err := e.Tick(id, 1); err != nil {
			return err
		}
		if nd.Replica.Status().RaftState != raft.StateFollower {
			return nil
		}
	}
	return nil
}

func (e *Env) electionTick() int {
	if e.cfg.ElectionTick == 0 {
		return 10
	}
	return e.cfg.ElectionTick
}

func (e *Env) heartbeatTick() int {
	if e.cfg.HeartbeatTick == 0 {
		return 1
	}
	return e.cfg.HeartbeatTick
}

// Crash drops what node did not fsync (percent > 0: keeps each unsynced
// block with that probability, drawn from the seed) and restarts it.
// Its pending operations fail with replica.ErrStopped.
func (e *Env) Crash(id uint64, percent int) error {
	nd, err := e.node(id)
	if err != nil {
		return err
	}
	e.indent = "  "
	defer func() { e.indent = "" }()
	if err := nd.crash(percent); err != nil {
		return err
	}
	e.settle()
	nd.printStatus()
	return nil
}

// Elapse moves the manual clock on by d in steps of step (default d),
// stabilizing after each, so that a leader whose dedup table holds records
// stamps the shard clock as time passes. The rounds' traces are not
// printed (only violations, errors and finished operations); it prints
// the clock and each node's shard clock at the end.
func (e *Env) Elapse(d, step time.Duration) error {
	if step <= 0 {
		step = d
	}
	if d <= 0 {
		return fmt.Errorf("%w: elapse needs d > 0", ErrBadCommand)
	}
	mark := len(e.lines)
	var err error
	for done := time.Duration(0); done < d && err == nil; done += step {
		e.Advance(min(step, d-done))
		err = e.Stabilize()
	}
	kept := e.lines[:mark]
	stamps := map[string]bool{}
	for _, l := range e.lines[mark:] {
		if strings.Contains(l, "VIOLATION") || strings.Contains(l, " done: ") || strings.HasPrefix(l, "error") {
			kept = append(kept, strings.TrimSpace(l))
		}
		for _, m := range stampRE.FindAllString(l, -1) {
			stamps[m] = true
		}
	}
	e.lines = kept
	e.printf("clock +%s (%d stamp-only entries replicated)", e.mono, len(stamps))
	for _, id := range e.ids {
		nd := e.nodes[id]
		nd.last = nd.statusLine()
		e.printf("%s shard clock %s", nd.last, nd.Replica.ShardClock())
	}
	return err
}

// stampRE matches a stamp-only entry in a message trace.
var stampRE = regexp.MustCompile(`[0-9]+/[0-9]+:stamp\([^)]*\)`)
