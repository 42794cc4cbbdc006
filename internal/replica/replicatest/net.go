package replicatest

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/wire"
	"go.etcd.io/raft/v3/raftpb"
)

// network holds the messages in flight, in the order they were sent, and
// the cut links. A message stays in flight until a command delivers or
// drops it; a held one (delayed) is left alone by every command that does
// not name held messages.
type network struct {
	queue []inflight
	cut   map[[2]uint64]bool
}

type inflight struct {
	m    raftpb.Message
	held bool
}

// send is every node's Config.Send. It checks the Ready order (what a
// message acknowledges is durable at the sender), then queues a copy of
// each message, or drops it on a cut link and tells the sender.
func (e *Env) send(from *Node, msgs []raftpb.Message) {
	e.checkDurable(from, msgs)
	for _, m := range msgs {
		b, err := m.Marshal()
		if err != nil {
			panic(fmt.Sprintf("replicatest: marshal message: %v", err))
		}
		var cp raftpb.Message
		if err := cp.Unmarshal(b); err != nil {
			panic(fmt.Sprintf("replicatest: unmarshal message: %v", err))
		}
		if e.net.cut[[2]uint64{cp.From, cp.To}] {
			e.printf("drop (partition) %s", describe(cp))
			e.lost(cp)
			continue
		}
		e.printf("send %s", describe(cp))
		e.net.queue = append(e.net.queue, inflight{m: cp})
	}
}

// lost tells the sender of m that it did not arrive.
func (e *Env) lost(m raftpb.Message) {
	nd := e.nodes[m.From]
	if nd == nil {
		return
	}
	if m.Type == raftpb.MsgSnap {
		e.releaseSnapshot(nd, m)
		nd.Replica.ReportSnapshot(m.To, false)
	} else {
		nd.Replica.ReportUnreachable(m.To)
	}
}

// msgFilter selects messages in flight.
type msgFilter struct {
	from, to uint64 // 0: any
	typ      string // "": any; else a raftpb type name without "Msg"
	held     bool   // select held messages (only)
}

func (f msgFilter) match(in inflight) bool {
	m := in.m
	return in.held == f.held && (f.from == 0 || m.From == f.from) && (f.to == 0 || m.To == f.to) &&
		(f.typ == "" || strings.EqualFold("Msg"+f.typ, m.Type.String()) || strings.EqualFold(f.typ, m.Type.String()))
}

// take removes and returns up to n (n < 0: all) matching messages in
// flight, in the order they were sent; with shuffle, in a random order.
func (e *Env) take(f msgFilter, n int, shuffle bool) []raftpb.Message {
	var out []raftpb.Message
	kept := e.net.queue[:0]
	for _, in := range e.net.queue {
		if f.match(in) && (n < 0 || len(out) < n) {
			out = append(out, in.m)
		} else {
			kept = append(kept, in)
		}
	}
	for i := len(kept); i < len(e.net.queue); i++ {
		e.net.queue[i] = inflight{}
	}
	e.net.queue = kept
	if shuffle {
		e.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// hold marks the matching messages in flight held (hold) or not
// (release), and returns how many changed.
func (e *Env) hold(f msgFilter, hold bool) int {
	n := 0
	for i := range e.net.queue {
		if f.match(e.net.queue[i]) {
			e.net.queue[i].held = hold
			n++
		}
	}
	return n
}

// deliver hands the messages to their receivers (a receiver on the other
// side of a cut link loses it) through what the store does with a peer's
// message: the checks of store.CheckMessage, then Replica.Step (whose
// round checks log positions before raft steps it); a MsgSnap is streamed
// (snap.go). breakAfter >= 0 breaks snapshot streams after that many
// chunks.
func (e *Env) deliver(msgs []raftpb.Message, breakAfter int) {
	for _, m := range msgs {
		to := e.nodes[m.To]
		if to == nil || e.net.cut[[2]uint64{m.From, m.To}] {
			e.printf("lost %s", describe(m))
			e.lost(m)
			continue
		}
		e.printf("deliver %s", describe(m))
		if m.Type == raftpb.MsgSnap {
			e.indent = "  "
			e.deliverSnapshot(m, breakAfter)
			e.indent = ""
			continue
		}
		if why := store.CheckMessage(to.Replica.Desc(), to.ID, &m, false); why >= 0 {
			e.printf("  refused %s (%s)", describe(m), store.DropReasons[why])
			continue
		}
		to.Replica.Step(m)
	}
}

// drop discards the messages, telling their senders.
func (e *Env) drop(msgs []raftpb.Message) {
	for _, m := range msgs {
		e.printf("drop %s", describe(m))
		e.lost(m)
	}
}

// partition cuts every link between the groups.
func (e *Env) partition(groups [][]uint64) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					e.net.cut[[2]uint64{a, b}] = true
				}
			}
		}
	}
}

// describe renders a message in one line, without the fields that vary
// from run to run (read contexts).
func describe(m raftpb.Message) string {
	t := strings.TrimPrefix(m.Type.String(), "Msg")
	s := fmt.Sprintf("%d->%d %s term=%d", m.From, m.To, t, m.Term)
	switch m.Type {
	case raftpb.MsgApp:
		s += fmt.Sprintf(" log=%d/%d commit=%d entries=%s", m.LogTerm, m.Index, m.Commit, describeEntries(m.Entries))
	case raftpb.MsgAppResp:
		s += fmt.Sprintf(" index=%d", m.Index)
		if m.Reject {
			s += fmt.Sprintf(" reject hint=%d", m.RejectHint)
		}
	case raftpb.MsgVote, raftpb.MsgPreVote:
		s += fmt.Sprintf(" log=%d/%d", m.LogTerm, m.Index)
	case raftpb.MsgVoteResp, raftpb.MsgPreVoteResp:
		if m.Reject {
			s += " reject"
		}
	case raftpb.MsgHeartbeat:
		s += fmt.Sprintf(" commit=%d", m.Commit)
	case raftpb.MsgSnap:
		md := m.Snapshot.Metadata
		s += fmt.Sprintf(" snap=%d/%d", md.Term, md.Index)
	case raftpb.MsgReadIndexResp:
		s += fmt.Sprintf(" index=%d", m.Index)
	case raftpb.MsgProp:
		s += fmt.Sprintf(" entries=%s", describeEntries(m.Entries))
	}
	return s
}

// describeEntries lists entries as term/index and their commands.
func describeEntries(ents []raftpb.Entry) string {
	parts := make([]string, 0, len(ents))
	for _, e := range ents {
		parts = append(parts, fmt.Sprintf("%d/%d%s", e.Term, e.Index, describeData(e)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeData(e raftpb.Entry) string {
	switch e.Type {
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		return ":conf"
	}
	if len(e.Data) == 0 {
		return ""
	}
	ent, err := wire.DecodeEntry(e.Data)
	if err != nil {
		return ":?"
	}
	cmds := ent.Commands
	if len(cmds) == 0 {
		return fmt.Sprintf(":stamp(%s)", time.Duration(ent.Clock))
	}
	var out []string
	for _, data := range cmds {
		var c wire.Command
		if err := c.Unmarshal(data); err != nil {
			out = append(out, "?")
			continue
		}
		switch c.Op {
		case wire.OpPut:
			out = append(out, fmt.Sprintf("put(%s=%s)", c.Key, c.Value))
		case wire.OpDelete:
			out = append(out, fmt.Sprintf("del(%s)", c.Key))
		}
	}
	return ":" + strings.Join(out, ",")
}
