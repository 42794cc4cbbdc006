package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// RecordKey is the reserved key holding the membership record. Keys
// beginning with ReservedPrefix are the system's: clients cannot read or
// write them.
const RecordKey = "\x00sys/members"

// ReservedPrefix is the first byte of every reserved key.
const ReservedPrefix = 0x00

// IsReserved reports whether key is reserved for the system.
func IsReserved(key []byte) bool { return len(key) > 0 && key[0] == ReservedPrefix }

// State of a member.
type State string

const (
	// Active members hold replicas and take new ones.
	Active State = "active"
	// Decommissioning members are drained by the balancer, then removed.
	Decommissioning State = "decommissioning"
	// Removed members left after a decommission; their id is never reused.
	Removed State = "removed"
	// Dead members will never come back; the balancer replaces their
	// replicas from the survivors. Their id is never reused.
	Dead State = "dead"
)

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	return s == Active || s == Decommissioning || s == Removed || s == Dead
}

// Gone reports whether a member in state s has left for good.
func (s State) Gone() bool { return s == Removed || s == Dead }

// Errors of the membership record's transitions.
var (
	// ErrIDInUse: the id belongs to an active member with other addresses.
	ErrIDInUse = errors.New("cluster: node id in use by another node")
	// ErrRemoved: the id belongs to a removed or dead member; ids are never
	// reused and a removed node is never re-admitted.
	ErrRemoved = errors.New("cluster: node was removed from the cluster")
	// ErrUnknownNode: no member has the id.
	ErrUnknownNode = errors.New("cluster: no such node")
	// ErrInvalid: a malformed request (id 0, an empty address, a limit out
	// of range).
	ErrInvalid = errors.New("cluster: invalid request")
	// ErrTooFewNodes: the change would leave fewer active nodes than the
	// replication factor, so some replicas could not be placed.
	ErrTooFewNodes = errors.New("cluster: too few active nodes for the replication factor")
	// ErrNotReady: the record is not written yet (the cluster is still
	// bootstrapping) or could not be read.
	ErrNotReady = errors.New("cluster: membership not ready")
	// ErrAddrInUse: another member already uses the address.
	ErrAddrInUse = errors.New("cluster: address in use by another node")
)

// Member is one node of the record.
type Member struct {
	ID       uint64 `json:"id"`
	HTTPAddr string `json:"http_addr,omitempty"`
	PeerAddr string `json:"peer_addr"`
	State    State  `json:"state"`
	// Role: "" or voter (the default), or read-replica (role.go).
	Role Role `json:"role,omitempty"`
	// DropLearners: a read replica turned voter whose learners the
	// balancer removes before it places voters on it (role.go); cleared
	// once the node holds no learner.
	DropLearners bool `json:"drop_learners,omitempty"`
}

// Settings are the cluster-wide balancing settings changed at run time
// (PUT /v1/admin/settings). A nil field leaves each node's flag in force.
type Settings struct {
	// TransferLimit bounds the replica moves touching one node at once.
	TransferLimit *int `json:"transfer_limit,omitempty"`
	// SnapshotRate bounds a node's snapshot streaming, bytes/s (0:
	// unlimited).
	SnapshotRate *int64 `json:"snapshot_rate,omitempty"`
	// Rebalance: false stops the balancer's rebalancing moves (repairs go
	// on); nil or true: on.
	Rebalance *bool `json:"rebalance,omitempty"`
}

// Record is the membership record.
type Record struct {
	Members []Member `json:"members"`
	// UsedIDs lists every id ever admitted, sorted (ids are never reused).
	UsedIDs  []uint64 `json:"used_ids"`
	Settings Settings `json:"settings"`
	// PausedUntil (Unix nanoseconds): no rebalancing before, after a
	// replica moved by hand (Manager.PauseRebalancing).
	PausedUntil int64 `json:"rebalance_paused_until,omitempty"`
}

// Bootstrap is the record of a new cluster: every node of peers (id ->
// peer address) active.
func Bootstrap(peers map[uint64]string) Record {
	var r Record
	for id, addr := range peers {
		r.Members = append(r.Members, Member{ID: id, PeerAddr: addr, State: Active})
		r.UsedIDs = append(r.UsedIDs, id)
	}
	r.normalize()
	return r
}

func (r *Record) normalize() {
	sort.Slice(r.Members, func(i, j int) bool { return r.Members[i].ID < r.Members[j].ID })
	slices.Sort(r.UsedIDs)
	r.UsedIDs = slices.Compact(r.UsedIDs)
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	out := Record{Members: slices.Clone(r.Members), UsedIDs: slices.Clone(r.UsedIDs), PausedUntil: r.PausedUntil}
	if r.Settings.Rebalance != nil {
		v := *r.Settings.Rebalance
		out.Settings.Rebalance = &v
	}
	if r.Settings.TransferLimit != nil {
		v := *r.Settings.TransferLimit
		out.Settings.TransferLimit = &v
	}
	if r.Settings.SnapshotRate != nil {
		v := *r.Settings.SnapshotRate
		out.Settings.SnapshotRate = &v
	}
	return out
}

// Member returns the member with the given id.
func (r Record) Member(id uint64) (Member, bool) {
	for _, m := range r.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Count returns the number of members in state s.
func (r Record) Count(s State) int {
	n := 0
	for _, m := range r.Members {
		if m.State == s {
			n++
		}
	}
	return n
}

// Peers maps every member not gone to its peer address.
func (r Record) Peers() map[uint64]string {
	out := map[uint64]string{}
	for _, m := range r.Members {
		if !m.State.Gone() {
			out[m.ID] = m.PeerAddr
		}
	}
	return out
}

// Validate checks the record's invariants: unique ids, valid states,
// every member's id in UsedIDs.
func (r Record) Validate() error {
	seen := map[uint64]bool{}
	for _, m := range r.Members {
		switch {
		case m.ID == 0:
			return fmt.Errorf("%w: member with id 0", ErrInvalid)
		case seen[m.ID]:
			return fmt.Errorf("%w: member %d twice", ErrInvalid, m.ID)
		case !m.State.Valid():
			return fmt.Errorf("%w: member %d in state %q", ErrInvalid, m.ID, m.State)
		case !slices.Contains(r.UsedIDs, m.ID):
			return fmt.Errorf("%w: member %d not in used ids", ErrInvalid, m.ID)
		}
		seen[m.ID] = true
	}
	return nil
}

// Join returns the record with node id admitted as an active member at
// the given addresses. changed is false when it already was (a retried
// join). A removed or dead id gives ErrRemoved, an id used by a member
// with other addresses ErrIDInUse, an address another member uses
// ErrAddrInUse.
func (r Record) Join(id uint64, httpAddr, peerAddr string) (out Record, changed bool, err error) {
	if id == 0 || peerAddr == "" || httpAddr == "" {
		return r, false, fmt.Errorf("%w: a join needs a node id > 0, an HTTP address and a peer address", ErrInvalid)
	}
	if err := r.addrsFree(id, httpAddr, peerAddr); err != nil {
		return r, false, err
	}
	if m, ok := r.Member(id); ok {
		switch {
		case m.State.Gone():
			return r, false, fmt.Errorf("%w: node %d is %s; node ids are never reused, start the node with a new id and an empty data dir", ErrRemoved, id, m.State)
		case m.PeerAddr != peerAddr || (m.HTTPAddr != "" && m.HTTPAddr != httpAddr):
			return r, false, fmt.Errorf("%w: node %d is a member at peer %s, http %s", ErrIDInUse, id, m.PeerAddr, m.HTTPAddr)
		case m.HTTPAddr == httpAddr:
			return r, false, nil
		}
		// A member of the initial cluster tells its HTTP address.
		out = r.Clone()
		out.set(id, func(m *Member) { m.HTTPAddr = httpAddr })
		return out, true, nil
	}
	if slices.Contains(r.UsedIDs, id) {
		return r, false, fmt.Errorf("%w: node id %d was used before; ids are never reused", ErrRemoved, id)
	}
	out = r.Clone()
	out.Members = append(out.Members, Member{ID: id, HTTPAddr: httpAddr, PeerAddr: peerAddr, State: Active})
	out.UsedIDs = append(out.UsedIDs, id)
	out.normalize()
	return out, true, nil
}

// addrsFree returns ErrAddrInUse when a member other than id, not gone,
// uses httpAddr or peerAddr (an empty address is no conflict: members of
// the initial cluster have no HTTP address until they tell it). A
// removed or dead member's addresses are free.
func (r Record) addrsFree(id uint64, httpAddr, peerAddr string) error {
	for _, m := range r.Members {
		if m.ID == id || m.State.Gone() {
			continue
		}
		if peerAddr != "" && m.PeerAddr == peerAddr {
			return fmt.Errorf("%w: node %d already uses peer address %s", ErrAddrInUse, m.ID, peerAddr)
		}
		if httpAddr != "" && m.HTTPAddr == httpAddr {
			return fmt.Errorf("%w: node %d already uses HTTP address %s", ErrAddrInUse, m.ID, httpAddr)
		}
	}
	return nil
}

// SetAddrs returns the record with member id's addresses set (a node
// telling the cluster where it listens at start; an empty peerAddr keeps
// the recorded one). A gone member gives ErrRemoved; an address another
// member uses ErrAddrInUse, as for Join: peers would send that member's
// raft traffic, and clients its requests, to this node.
func (r Record) SetAddrs(id uint64, httpAddr, peerAddr string) (Record, bool, error) {
	m, ok := r.Member(id)
	if !ok {
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	}
	if m.State.Gone() {
		return r, false, fmt.Errorf("%w: node %d is %s", ErrRemoved, id, m.State)
	}
	if err := r.addrsFree(id, httpAddr, peerAddr); err != nil {
		return r, false, err
	}
	if m.HTTPAddr == httpAddr && (peerAddr == "" || m.PeerAddr == peerAddr) {
		return r, false, nil
	}
	out := r.Clone()
	out.set(id, func(m *Member) {
		m.HTTPAddr = httpAddr
		if peerAddr != "" {
			m.PeerAddr = peerAddr
		}
	})
	return out, true, nil
}

// Decommission returns the record with member id decommissioning. It
// refuses (ErrTooFewNodes) when fewer than rf active members would remain.
func (r Record) Decommission(id uint64, rf int) (Record, bool, error) {
	m, ok := r.Member(id)
	switch {
	case !ok:
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	case m.State.Gone():
		return r, false, fmt.Errorf("%w: node %d is already %s", ErrRemoved, id, m.State)
	case m.State == Decommissioning:
		return r, false, nil
	case !m.ReadReplica() && r.CountVoters()-1 < rf:
		return r, false, fmt.Errorf("%w: decommissioning node %d would leave %d active nodes for replication %d; add a node first",
			ErrTooFewNodes, id, r.CountVoters()-1, rf)
	}
	out := r.Clone()
	out.set(id, func(m *Member) { m.State = Decommissioning })
	return out, true, nil
}

// MarkDead returns the record with member id dead (it will never come
// back; its replicas are replaced from the survivors).
func (r Record) MarkDead(id uint64) (Record, bool, error) {
	m, ok := r.Member(id)
	switch {
	case !ok:
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	case m.State == Dead:
		return r, false, nil
	case m.State == Removed:
		return r, false, fmt.Errorf("%w: node %d is already removed", ErrRemoved, id)
	}
	out := r.Clone()
	out.set(id, func(m *Member) { m.State = Dead })
	return out, true, nil
}

// MarkRemoved returns the record with decommissioning member id removed.
func (r Record) MarkRemoved(id uint64) (Record, bool, error) {
	m, ok := r.Member(id)
	switch {
	case !ok:
		return r, false, fmt.Errorf("%w: %d", ErrUnknownNode, id)
	case m.State == Removed:
		return r, false, nil
	case m.State != Decommissioning:
		return r, false, fmt.Errorf("%w: node %d is %s, not decommissioning", ErrInvalid, id, m.State)
	}
	out := r.Clone()
	out.set(id, func(m *Member) { m.State = Removed })
	return out, true, nil
}

// WithSettings returns the record with the non-nil fields of s set.
func (r Record) WithSettings(s Settings) (Record, bool, error) {
	if s.TransferLimit != nil && (*s.TransferLimit < 1 || *s.TransferLimit > 64) {
		return r, false, fmt.Errorf("%w: transfer_limit %d: want 1 to 64", ErrInvalid, *s.TransferLimit)
	}
	if s.SnapshotRate != nil && *s.SnapshotRate < 0 {
		return r, false, fmt.Errorf("%w: snapshot_rate %d: want 0 (unlimited) or more bytes/s", ErrInvalid, *s.SnapshotRate)
	}
	if s.TransferLimit == nil && s.SnapshotRate == nil && s.Rebalance == nil {
		return r, false, nil
	}
	out := r.Clone()
	if s.TransferLimit != nil {
		v := *s.TransferLimit
		out.Settings.TransferLimit = &v
	}
	if s.SnapshotRate != nil {
		v := *s.SnapshotRate
		out.Settings.SnapshotRate = &v
	}
	if s.Rebalance != nil {
		v := *s.Rebalance
		out.Settings.Rebalance = &v
	}
	return out, true, nil
}

// RebalancingOff reports whether rebalancing is off or paused at now.
func (r Record) RebalancingOff(now time.Time) bool {
	return (r.Settings.Rebalance != nil && !*r.Settings.Rebalance) || now.UnixNano() < r.PausedUntil
}

func (r *Record) set(id uint64, f func(*Member)) {
	for i := range r.Members {
		if r.Members[i].ID == id {
			f(&r.Members[i])
		}
	}
}

// Marshal encodes the record.
func (r Record) Marshal() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("cluster: marshal record: %v", err))
	}
	return b
}

// UnmarshalRecord decodes and validates a record.
func UnmarshalRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("cluster: bad membership record: %w", err)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("cluster: bad membership record: %w", err)
	}
	r.normalize()
	return r, nil
}
