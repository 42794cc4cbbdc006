package replicatest

import (
	"fmt"
	"strings"

	"github.com/cairn-db/cairn/internal/wire"
	"github.com/cockroachdb/datadriven"
	"go.etcd.io/raft/v3/raftpb"
)

// Handle runs one datadriven command (see doc.go) and returns its output.
// An error is printed as the output ("error: ..."), so scripts can show
// refused commands too.
//
// A panic (a broken assertion in the replica, a fatal storage error) is
// printed too, as a violation; every later command then fails without
// touching the nodes (a replica may be left locked).
func (e *Env) Handle(td *datadriven.TestData) string {
	if e.panicked {
		return "error: the environment stopped after a panic"
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				e.panicked = true
				e.indent = ""
				e.violation("panic: %v", p)
			}
		}()
		if err := e.handle(td); err != nil {
			e.printf("error: %v", err)
		}
	}()
	return e.takeOutput()
}

func (e *Env) handle(td *datadriven.TestData) error {
	a := args(td)
	switch td.Cmd {
	case "add-nodes":
		var cfg nodeConfig
		var err error
		n := a.int("n", 3, &err)
		cfg.ElectionTick = a.int("election", 0, &err)
		cfg.HeartbeatTick = a.int("heartbeat", 0, &err)
		cfg.TruncateThreshold = uint64(a.int("truncate-threshold", 1<<20, &err))
		cfg.TruncateKeep = uint64(a.int("truncate-keep", 0, &err))
		cfg.TruncateBytes = uint64(a.int("truncate-bytes", 1<<30, &err))
		cfg.DedupTTL = a.duration("dedup-ttl", 0, &err)
		cfg.CutPastDown = a.int("cut-past-down", 0, &err) != 0
		cfg.LeaseDuration = a.duration("lease", 0, &err)
		if err != nil {
			return err
		}
		return e.AddNodes(n, cfg)
	case "campaign":
		return e.eachNode(a, false, func(nd *Node) error {
			nd.Replica.Campaign()
			_, err := e.ProcessReady(nd.ID)
			return err
		})
	case "transfer-leadership":
		var err error
		from, to := uint64(a.int("from", 0, &err)), uint64(a.int("to", 0, &err))
		if err != nil {
			return err
		}
		nd, err := e.node(from)
		if err != nil {
			return err
		}
		nd.Replica.TransferLeadership(to)
		_, err = e.ProcessReady(from)
		return err
	case "propose":
		return e.eachNode(a, false, func(nd *Node) error {
			var err error
			cmd := wire.Command{Op: wire.OpPut, Key: []byte(a.str("key", "k")), Value: []byte(a.str("value", ""))}
			if a.has("delete") {
				cmd.Op = wire.OpDelete
			}
			if id := a.str("id", ""); id != "" {
				cmd.RequestID = []byte(id)
			}
			if v := a.int("if-match", -1, &err); v >= 0 {
				cmd.Cond, cmd.Version = wire.CondIfMatch, uint64(v)
			}
			if a.has("if-absent") {
				cmd.Cond = wire.CondIfAbsent
			}
			if err != nil {
				return err
			}
			_, err = e.Propose(nd.ID, cmd)
			return err
		})
	case "read":
		return e.eachNode(a, false, func(nd *Node) error {
			_, err := e.Read(nd.ID, a.str("key", "k"), a.has("forward"))
			return err
		})
	case "process-ready":
		return e.eachNode(a, true, func(nd *Node) error {
			_, err := e.ProcessReady(nd.ID)
			return err
		})
	case "stage":
		return e.eachNode(a, false, func(nd *Node) error {
			ok, err := e.Stage(nd.ID)
			if err == nil && !ok {
				e.printf("n%d: no ready", nd.ID)
			}
			return err
		})
	case "finish":
		return e.eachNode(a, false, func(nd *Node) error { return e.Finish(nd.ID) })
	case "stabilize":
		return e.Stabilize()
	case "deliver-msgs", "drop-msgs":
		var err error
		f := a.filter(&err)
		n := a.int("count", -1, &err)
		if err != nil {
			return err
		}
		msgs := e.take(f, n, a.has("random"))
		if len(msgs) == 0 {
			e.printf("no messages")
		}
		if td.Cmd == "drop-msgs" {
			e.drop(msgs)
		} else {
			e.deliver(msgs, -1)
		}
		return nil
	case "drop-snapshot":
		var err error
		f := a.filter(&err)
		f.typ = "Snap"
		after := a.int("after", 1, &err)
		if err != nil {
			return err
		}
		msgs := e.take(f, -1, false)
		if len(msgs) == 0 {
			e.printf("no messages")
		}
		e.deliver(msgs, after)
		return nil
	case "inject":
		var err error
		m := raftpb.Message{
			From:    uint64(a.int("from", 0, &err)),
			To:      uint64(a.int("to", 0, &err)),
			Term:    uint64(a.int("term", 0, &err)),
			LogTerm: uint64(a.int("logterm", 0, &err)),
			Index:   uint64(a.int("index", 0, &err)),
			Commit:  uint64(a.int("commit", 0, &err)),
		}
		t, ok := raftpb.MessageType_value["Msg"+a.str("type", "")]
		if !ok && err == nil {
			err = fmt.Errorf("%w: inject: unknown type %q", ErrBadCommand, a.str("type", ""))
		}
		if err != nil {
			return err
		}
		m.Type = raftpb.MessageType(t)
		e.deliver([]raftpb.Message{m}, -1)
		return nil
	case "hold", "release":
		var err error
		f := a.filter(&err)
		if err != nil {
			return err
		}
		f.held = td.Cmd == "release"
		e.printf("%d messages %s", e.hold(f, td.Cmd == "hold"), map[bool]string{true: "held", false: "released"}[td.Cmd == "hold"])
		return nil
	case "msgs":
		for _, in := range e.net.queue {
			if in.held {
				e.printf("%s (held)", describe(in.m))
			} else {
				e.printf("%s", describe(in.m))
			}
		}
		if len(e.net.queue) == 0 {
			e.printf("no messages")
		}
		return nil
	case "partition":
		groups, err := a.groups()
		if err != nil {
			return err
		}
		e.partition(groups)
		return nil
	case "heal":
		clear(e.net.cut)
		return nil
	case "tick":
		var err error
		n := a.int("count", 1, &err)
		if err != nil {
			return err
		}
		if a.has("pending") {
			return e.eachNode(a, false, func(nd *Node) error { return e.TickOneRound(nd.ID, n) })
		}
		return e.eachNode(a, false, func(nd *Node) error { return e.Tick(nd.ID, n) })
	case "tick-heartbeat":
		return e.eachNode(a, false, func(nd *Node) error { return e.Tick(nd.ID, e.heartbeatTick()) })
	case "tick-election":
		return e.eachNode(a, false, func(nd *Node) error { return e.TickElection(nd.ID) })
	case "crash":
		var err error
		pct := a.int("percent", 0, &err)
		if err != nil {
			return err
		}
		return e.eachNode(a, a.has("all"), func(nd *Node) error {
			e.printf("n%d: crash", nd.ID)
			return e.Crash(nd.ID, pct)
		})
	case "advance-clock":
		var err error
		d := a.duration("d", 0, &err)
		if err != nil {
			return err
		}
		e.Advance(d)
		e.printf("clock +%s", e.mono)
		return nil
	case "clock-skew":
		var err error
		d := a.duration("d", 0, &err)
		if err != nil {
			return err
		}
		return e.eachNode(a, false, func(nd *Node) error {
			if err := e.SetSkew(nd.ID, d); err != nil {
				return err
			}
			e.printf("n%d: clock reads +%s", nd.ID, e.mono+d)
			return nil
		})
	case "elapse":
		var err error
		d := a.duration("d", 0, &err)
		step := a.duration("step", 0, &err)
		if err != nil {
			return err
		}
		return e.Elapse(d, step)
	case "staging":
		return e.eachNode(a, true, func(nd *Node) error {
			files, err := nd.stagingFiles()
			e.printf("n%d: %d staged files", nd.ID, len(files)) // their names are random
			return err
		})
	case "get":
		key := a.str("key", "k")
		return e.eachNode(a, true, func(nd *Node) error {
			ver, val, ok, err := nd.get(key)
			switch {
			case err != nil:
				return err
			case !ok:
				e.printf("n%d: %s absent", nd.ID, key)
			default:
				e.printf("n%d: %s=%s version=%d", nd.ID, key, val, ver)
			}
			return nil
		})
	case "status":
		return e.eachNode(a, true, func(nd *Node) error {
			nd.last = nd.statusLine()
			e.printf("%s", nd.last)
			return nil
		})
	case "leader-lost":
		return e.eachNode(a, true, func(nd *Node) error {
			e.printf("n%d: lead=%d leader lost=%t", nd.ID, nd.Replica.Leader(), nd.Replica.LeaderLost())
			return nil
		})
	case "ops":
		for _, op := range e.ops {
			if !op.Done() {
				e.printf("op %d pending: %s", op.ID, op.Desc)
			}
		}
		return nil
	case "dedup":
		return e.eachNode(a, true, func(nd *Node) error {
			if nd.staged != nil {
				return fmt.Errorf("%w: n%d", ErrStaged, nd.ID)
			}
			buckets, counts, err := nd.dedupGroups()
			var parts []string
			for i, b := range buckets {
				parts = append(parts, fmt.Sprintf("%d:%d", b, counts[i]))
			}
			e.printf("n%d: shard clock %s, dedup groups by bucket [%s]", nd.ID, nd.Replica.ShardClock(), strings.Join(parts, " "))
			return err
		})
	case "check-consistency":
		return e.checkConsistency()
	case "add-node":
		ids := a.nodes()
		if len(ids) != 1 {
			return fmt.Errorf("%w: add-node <id>", ErrBadCommand)
		}
		return e.AddNode(ids[0])
	case "conf-change":
		cc, err := parseConfChange(a)
		if err != nil {
			return err
		}
		return e.eachNode(a, false, func(nd *Node) error { return e.ConfChange(nd.ID, cc) })
	case "desc":
		return e.eachNode(a, true, func(nd *Node) error {
			e.printf("%s", nd.descLine())
			return nil
		})
	}
	return fmt.Errorf("%w: unknown command %q", ErrBadCommand, td.Cmd)
}

// checkConsistency compares the data of every node that has applied as
// far as the most advanced one.
func (e *Env) checkConsistency() error {
	var want string
	var wantApplied uint64
	for _, id := range e.ids {
		applied, h, err := e.nodes[id].Replica.Hash()
		if err != nil {
			return err
		}
		e.printf("n%d: applied=%d hash=%s", id, applied, h)
		if want == "" || applied > wantApplied {
			want, wantApplied = h, applied
		}
	}
	for _, id := range e.ids {
		applied, h, _ := e.nodes[id].Replica.Hash()
		if applied == wantApplied && h != want {
			e.violation("n%d diverges at applied index %d", id, applied)
		}
	}
	return nil
}

// eachNode runs f for the nodes named by bare numeric arguments (every
// node if none and all is set).
func (e *Env) eachNode(a cmdArgs, all bool, f func(*Node) error) error {
	ids := a.nodes()
	if len(ids) == 0 {
		if !all {
			return fmt.Errorf("%w: which node?", ErrBadCommand)
		}
		ids = e.ids
	}
	for _, id := range ids {
		nd, err := e.node(id)
		if err != nil {
			return err
		}
		if err := f(nd); err != nil {
			return err
		}
	}
	return nil
}
