package cluster

import (
	"slices"
	"sort"

	"github.com/cairn-db/cairn/internal/shard"
)

// Reasons of a Move.
const (
	// Repair moves restore the replication factor: they take a replica off
	// a dead, removed or decommissioning node, or add a missing one.
	Repair = "repair"
	// Balance moves even out replica counts across active nodes.
	Balance = "balance"
	// Learn moves add a learner replica on a read replica, or remove one
	// from a read replica turned voter (role.go).
	Learn = "read-replica"
)

// Move is one replica move the balancer runs.
type Move struct {
	Shard uint64 `json:"shard"`
	// From is the node giving up its replica; 0 when the shard lacks a
	// replica and one is added.
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
	// Learner: the move adds a learner on To (From 0) or removes the
	// learner on From (To 0); a read replica's replicas (role.go).
	Learner bool `json:"learner,omitempty"`
}

// PlanInput is everything Plan decides from.
type PlanInput struct {
	Shards      []shard.Descriptor
	Members     []Member
	Replication int
	// InFlight are the moves running now: their shards get no other move,
	// their nodes count them against TransferLimit, and the replica counts
	// are taken as if they were done.
	InFlight []Move
	// TransferLimit bounds the moves touching one node at once (as the
	// destination, or as a source that is alive). Below 1: 1.
	TransferLimit int
	// MaxMoves bounds the moves planned at once. Below 1: 1.
	MaxMoves int
	// Skip lists shards to leave alone this time (a move of theirs failed
	// lately); their replicas still count.
	Skip []uint64
	// NoBalance plans repairs only (rebalancing is paused).
	NoBalance bool
}

// Plan returns the replica moves to start now, most urgent first.
//
// It first restores the replication factor: every shard with a replica on
// a dead, removed or decommissioning node moves it to an active node, and
// every shard with fewer than Replication replicas gets one more — shards
// with the fewest healthy replicas first. Only when no repair is planned or
// running does it even out replica counts, moving from the most to the
// least loaded active node while they differ by two or more.
//
// A move never targets a node that is not active, still drops a read
// replica's learners, or already holds (or is about to hold) a replica of
// the shard, never touches a shard with a move in flight, and never makes
// a node take part in more than TransferLimit moves (a learner's removal
// takes no slot). Nodes in no member record are left alone. Plan is pure.
func Plan(in PlanInput) []Move {
	p := newPlanner(in)
	repairs := len(p.repairs())
	p.learners()
	if repairs > 0 || p.repairing || in.NoBalance {
		return p.moves
	}
	return p.balance()
}

type planner struct {
	in    PlanInput
	limit int
	max   int
	state map[uint64]State
	// busy counts the moves (running or planned) touching each node.
	busy map[uint64]int
	// count is each active node's replicas, in-flight moves done.
	count map[uint64]int
	// held marks shard -> node holding or about to hold a replica.
	held map[uint64]map[uint64]bool
	// taken marks shards with a move running or planned.
	taken map[uint64]bool
	// desc is each shard's descriptor: a node it names in any role (a
	// learner left by an interrupted move too) takes no new replica of it.
	desc    map[uint64]shard.Descriptor
	active  []uint64
	readers []uint64 // active read replicas
	role    map[uint64]Role
	// drop marks the members whose learners are removed before they take
	// a voter (Member.DropLearners: read replicas turned voters).
	drop      map[uint64]bool
	repairing bool
	moves     []Move
	// first is each shard's preferred leader (its descriptor's first
	// replica) once the planned moves are done; pref counts them by node.
	first map[uint64]uint64
	pref  map[uint64]int
}

func newPlanner(in PlanInput) *planner {
	p := &planner{in: in, limit: max(in.TransferLimit, 1), max: max(in.MaxMoves, 1),
		state: map[uint64]State{}, role: map[uint64]Role{}, drop: map[uint64]bool{}, busy: map[uint64]int{}, count: map[uint64]int{},
		held: map[uint64]map[uint64]bool{}, taken: map[uint64]bool{}, desc: map[uint64]shard.Descriptor{},
		first: map[uint64]uint64{}, pref: map[uint64]int{}}
	for _, m := range in.Members {
		p.state[m.ID] = m.State
		p.role[m.ID] = m.RoleOf()
		p.drop[m.ID] = m.DropLearners
		if m.State == Active && m.ReadReplica() {
			p.readers = append(p.readers, m.ID)
		} else if m.State == Active {
			p.active = append(p.active, m.ID)
			p.count[m.ID] = 0
		}
	}
	slices.Sort(p.active)
	slices.Sort(p.readers)
	for _, d := range in.Shards {
		p.desc[d.ID] = d
		if len(d.Replicas) > 0 {
			p.first[d.ID] = d.Replicas[0]
			p.pref[d.Replicas[0]]++
		}
		h := map[uint64]bool{}
		for _, n := range d.Replicas {
			h[n] = true
		}
		p.held[d.ID] = h
	}
	for _, id := range in.Skip {
		p.taken[id] = true
	}
	for _, mv := range in.InFlight {
		p.taken[mv.Shard] = true
		if mv.Reason == Repair {
			p.repairing = true
		}
		p.charge(mv)
		if h := p.held[mv.Shard]; h != nil && !mv.Learner {
			delete(h, mv.From)
			h[mv.To] = true
		}
	}
	for _, d := range in.Shards {
		for n := range p.held[d.ID] {
			if _, ok := p.count[n]; ok {
				p.count[n]++
			}
		}
	}
	return p
}

// alive reports whether node n takes part in a move's work (a dead or
// removed source does nothing; the shard's leader sends the data).
func (p *planner) alive(n uint64) bool {
	s := p.state[n]
	return s == Active || s == Decommissioning
}

// charge counts mv against the transfer limits of the nodes it touches.
// A learner's removal streams nothing and takes no slot.
func (p *planner) charge(mv Move) {
	if mv.Learner && mv.To == 0 {
		return
	}
	if mv.To != 0 {
		p.busy[mv.To]++
	}
	if mv.From != 0 && p.alive(mv.From) {
		p.busy[mv.From]++
	}
}

func (p *planner) free(n uint64) bool { return p.busy[n] < p.limit }

// add records a planned move.
func (p *planner) add(mv Move) {
	p.moves = append(p.moves, mv)
	p.taken[mv.Shard] = true
	p.charge(mv)
	h := p.held[mv.Shard]
	if mv.From != 0 {
		delete(h, mv.From)
		if _, ok := p.count[mv.From]; ok {
			p.count[mv.From]--
		}
	}
	h[mv.To] = true
	p.count[mv.To]++
	// The new replica takes the old one's place in the descriptor, so the
	// preferred leader's slot (the first) moves with it.
	if mv.From != 0 && p.first[mv.Shard] == mv.From {
		p.first[mv.Shard] = mv.To
		p.pref[mv.From]--
		p.pref[mv.To]++
	}
}

// holds reports whether node n holds or is about to hold a replica of
// shard id, in any role.
func (p *planner) holds(id, n uint64) bool {
	return p.held[id][n] || p.desc[id].HasReplica(n)
}

// target is the least loaded free active node not holding shard id (nor
// still dropping a read replica's learners).
func (p *planner) target(id uint64) (uint64, bool) {
	best, found := uint64(0), false
	for _, n := range p.active {
		if p.holds(id, n) || !p.free(n) || p.drop[n] {
			continue
		}
		if !found || p.count[n] < p.count[best] {
			best, found = n, true
		}
	}
	return best, found
}

// leaving reports whether (voting) replicas on node n must move away: a
// read replica holds no voter.
func (p *planner) leaving(n uint64) bool {
	s := p.state[n]
	return s == Dead || s == Removed || s == Decommissioning || p.role[n] == ReadReplica
}

func (p *planner) repairs() []Move {
	type need struct {
		d       shard.Descriptor
		healthy int
	}
	var needs []need
	for _, d := range p.in.Shards {
		healthy, bad := 0, false
		for n := range p.held[d.ID] {
			if p.leaving(n) {
				bad = true
			} else {
				healthy++
			}
		}
		if bad || len(p.held[d.ID]) < p.in.Replication {
			needs = append(needs, need{d, healthy})
		}
	}
	sort.SliceStable(needs, func(i, j int) bool {
		if needs[i].healthy != needs[j].healthy {
			return needs[i].healthy < needs[j].healthy
		}
		return needs[i].d.ID < needs[j].d.ID
	})
	for _, nd := range needs {
		if len(p.moves) >= p.max {
			break
		}
		id := nd.d.ID
		if p.taken[id] {
			continue
		}
		from := p.source(id)
		if from == 0 && len(p.held[id]) >= p.in.Replication {
			continue
		}
		if from != 0 && p.alive(from) && !p.free(from) {
			continue
		}
		to, ok := p.target(id)
		if !ok {
			continue
		}
		p.add(Move{Shard: id, From: from, To: to, Reason: Repair})
	}
	return p.moves
}

// source is the replica of shard id to move away first: on a dead or
// removed node, then on a decommissioning one (lowest id); 0 if none.
func (p *planner) source(id uint64) uint64 {
	var gone, draining []uint64
	for n := range p.held[id] {
		switch p.state[n] {
		case Dead, Removed:
			gone = append(gone, n)
		case Decommissioning:
			draining = append(draining, n)
		default:
			if p.role[n] == ReadReplica {
				draining = append(draining, n)
			}
		}
	}
	slices.Sort(gone)
	slices.Sort(draining)
	if len(gone) > 0 {
		return gone[0]
	}
	if len(draining) > 0 {
		return draining[0]
	}
	return 0
}

func (p *planner) balance() []Move {
	for len(p.moves) < p.max {
		if !p.balanceOne() {
			break
		}
	}
	return p.moves
}

// balanceOne plans one move from a more loaded to a less loaded active
// node (counts differing by two or more); false when there is none.
func (p *planner) balanceOne() bool {
	desc := slices.Clone(p.active)
	sort.SliceStable(desc, func(i, j int) bool { return p.count[desc[i]] > p.count[desc[j]] })
	asc := slices.Clone(desc)
	slices.Reverse(asc)
	sort.SliceStable(asc, func(i, j int) bool { return p.count[asc[i]] < p.count[asc[j]] })
	for _, src := range desc {
		if !p.free(src) {
			continue
		}
		for _, dst := range asc {
			if p.count[src]-p.count[dst] < 2 {
				break
			}
			if dst == src || !p.free(dst) || p.drop[dst] {
				continue
			}
			// Leadership follows the first slot of a descriptor, which a
			// move hands to the new replica: move a shard src is the
			// preferred leader of only while src prefers two or more
			// shards more than dst, so leader counts even out with the
			// replica counts; else any shard will do.
			wantPref := p.pref[src]-p.pref[dst] >= 2
			for pass := range 2 {
				for _, d := range p.in.Shards {
					if p.taken[d.ID] || !p.held[d.ID][src] || p.holds(d.ID, dst) {
						continue
					}
					if pass == 0 && (p.first[d.ID] == src) != wantPref {
						continue
					}
					p.add(Move{Shard: d.ID, From: src, To: dst, Reason: Balance})
					return true
				}
			}
		}
	}
	return false
}
