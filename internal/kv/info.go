package kv

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
)

// Status describes this node.
func (c *Coordinator) Status() NodeStatus {
	st := NodeStatus{
		NodeID: c.cfg.NodeID, HTTPAddr: c.cfg.HTTPAddr, PeerAddr: c.cfg.PeerAddr,
		Replication: c.cfg.Replication, ShardCount: len(c.cfg.Store.Cover()), Version: c.cfg.Version,
	}
	for _, r := range c.cfg.Store.Replicas() {
		st.Replicas++
		if r.IsLeader() {
			st.Leaders++
		}
	}
	st.Uptime = time.Since(c.started)
	st.UptimeSec = st.Uptime.Seconds()
	if c.cfg.Disk != nil {
		d := c.cfg.Disk()
		st.Disk = &d
	}
	return st
}

// clusterAskTimeout bounds Cluster's questions to the other nodes: a
// paused or cut-off node delays GET /v1/cluster by at most this much.
const clusterAskTimeout = 500 * time.Millisecond

// Cluster describes the members and shards as this node sees them. Where
// it lacks something — a member's HTTP address, the leader of a shard it
// holds no replica of (or whose replica knows no leader) — it asks every
// other node at once over the transport (wire.KindNodeInfo), bounded by
// clusterAskTimeout: a shard's leader is then the one its replicas name
// with the highest term, and a member's HTTP address the one it gave. A
// node that does not answer leaves what this node knew before (the leader
// it last routed to, the address the node last gave).
func (c *Coordinator) Cluster(ctx context.Context) ClusterInfo {
	ci := ClusterInfo{NodeID: c.cfg.NodeID, Replication: c.cfg.Replication, Scrub: c.cfg.Store.ScrubStats()}
	scrubs := c.cfg.Store.LastScrubs()
	var views map[uint64]wire.NodeInfo
	if c.clusterNeedsPeers() {
		views = c.askPeers(ctx)
	}
	// The leader each shard's replicas name, highest term first.
	remote := map[uint64]wire.ShardLeader{}
	for _, v := range views {
		c.learnDescriptors(v.Descriptors)
	}
	for node, v := range views {
		for _, l := range v.Leaders {
			d := c.descriptor(l.ShardID)
			if d.ID == 0 || l.Leader == 0 || !d.HasReplica(node) {
				continue
			}
			if best, ok := remote[l.ShardID]; !ok || l.Term > best.Term {
				remote[l.ShardID] = l
			}
		}
	}
	c.mu.Lock()
	for node, v := range views {
		if v.HTTPAddr != "" {
			c.mu.httpAddrs[node] = v.HTTPAddr
		}
	}
	for id, addr := range c.mu.peers {
		m := MemberInfo{NodeID: id, PeerAddr: addr, HTTPAddr: c.mu.httpAddrs[id], Reachable: c.cfg.Transport.Reachable(id),
			State: c.mu.states[id], Role: c.mu.roles[id]}
		if id == c.cfg.NodeID {
			m.HTTPAddr, m.Reachable = c.cfg.HTTPAddr, true
			if lag, ok := c.MaxLearnerLag(); ok {
				m.MaxLag = &lag
			}
		}
		ci.Members = append(ci.Members, m)
	}
	c.mu.Unlock()
	sort.Slice(ci.Members, func(i, j int) bool { return ci.Members[i].NodeID < ci.Members[j].NodeID })
	lags := map[uint64]uint64{}
	for _, l := range c.LearnerLags() {
		lags[l.Shard] = l.Entries
	}
	for _, d := range c.shardViews() {
		si := ShardInfo{
			ID: d.ID, TokenStart: fmt.Sprintf("%016x", d.Start), TokenEnd: fmt.Sprintf("%016x", d.End),
			Epoch: d.Epoch, Replicas: d.Replicas, Learners: d.Learners,
		}
		if d.End == 0 {
			si.TokenEnd = "10000000000000000"
		}
		r := c.cfg.Store.Replica(d.ID)
		if lag, ok := lags[d.ID]; ok {
			si.Lag = &lag
		}
		si.LearnerLag = c.cfg.Store.LeaderLearnerLags(d.ID)
		if r != nil {
			si.Term, si.Applied, si.Leader = r.Term(), r.Applied(), r.Leader()
			verified := r.Verified()
			si.Verified = &verified
			if sc, ok := scrubs[d.ID]; ok {
				si.Scrub = &sc
			}
		}
		if si.Leader == 0 {
			if l, ok := remote[d.ID]; ok {
				si.Leader = l.Leader
				if r == nil {
					c.setLeader(d.ID, l.Leader) // routing may use it too
				}
			} else {
				si.Leader = c.leaderGuess(d)
			}
		}
		ci.Shards = append(ci.Shards, si)
	}
	return ci
}

// Member is one member as SetMembers takes it.
type Member struct {
	ID                 uint64
	HTTPAddr, PeerAddr string
	State              string
	// Role: "" (voter) or read-replica.
	Role string
}

// SetMembers replaces the members Cluster lists and asks (the membership
// record's members that have not left, as the node last read it).
func (c *Coordinator) SetMembers(ms []Member) {
	peers, states := map[uint64]string{}, map[uint64]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	roles := map[uint64]string{}
	for _, m := range ms {
		peers[m.ID], states[m.ID], roles[m.ID] = m.PeerAddr, m.State, m.Role
		if m.ID == c.cfg.NodeID {
			c.readReplica.Store(m.Role == roleReadReplica)
		}
		if m.HTTPAddr != "" && m.ID != c.cfg.NodeID {
			c.mu.httpAddrs[m.ID] = m.HTTPAddr
		}
	}
	c.mu.peers, c.mu.states, c.mu.roles = peers, states, roles
}

// peers returns the members' peer addresses.
func (c *Coordinator) peers() map[uint64]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.peers
}

// clusterNeedsPeers reports whether Cluster lacks a member's HTTP address
// or a leader its own replicas cannot name.
func (c *Coordinator) clusterNeedsPeers() bool {
	for _, d := range c.cfg.Store.Cover() {
		if r := c.cfg.Store.Replica(d.ID); r == nil || r.Leader() == 0 {
			return true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.mu.peers {
		if id != c.cfg.NodeID && c.mu.httpAddrs[id] == "" {
			return true
		}
	}
	return false
}

// askPeers asks every other node for its NodeInfo at once and returns the
// answers that came within clusterAskTimeout.
func (c *Coordinator) askPeers(ctx context.Context) map[uint64]wire.NodeInfo {
	ctx, cancel := context.WithTimeout(ctx, clusterAskTimeout)
	defer cancel()
	type answer struct {
		node uint64
		info wire.NodeInfo
		ok   bool
	}
	peers := c.peers()
	answers := make(chan answer, len(peers))
	asked := 0
	for id := range peers {
		if id == c.cfg.NodeID {
			continue
		}
		asked++
		go func(id uint64) {
			a := answer{node: id}
			req := &wire.Request{Kind: wire.KindNodeInfo, Sender: c.cfg.NodeID}
			if dl, ok := ctx.Deadline(); ok {
				req.DeadlineUnixNano = c.cfg.Clock.ToWall(dl).UnixNano()
			}
			resp, err := c.cfg.Transport.Request(ctx, id, req)
			if err == nil && resp.Status == wire.StatusOK {
				a.ok = a.info.Unmarshal(resp.Value) == nil
			}
			answers <- a
		}(id)
	}
	out := map[uint64]wire.NodeInfo{}
	for ; asked > 0; asked-- {
		if a := <-answers; a.ok {
			out[a.node] = a.info
		}
	}
	return out
}

// nodeInfo is this node's answer to wire.KindNodeInfo.
func (c *Coordinator) nodeInfo() *wire.NodeInfo {
	n := &wire.NodeInfo{HTTPAddr: c.cfg.HTTPAddr}
	for id, r := range c.cfg.Store.Replicas() {
		n.Leaders = append(n.Leaders, wire.ShardLeader{ShardID: id, Leader: r.Leader(), Term: r.Term()})
	}
	n.Descriptors = c.cfg.Store.NodeInfoDescriptors()
	return n
}

// ShardHashes fingerprints every local replica, in shard order.
func (c *Coordinator) ShardHashes() ([]ShardHash, error) {
	var out []ShardHash
	for id, r := range c.cfg.Store.Replicas() {
		applied, h, err := r.Hash()
		if err != nil {
			return nil, err
		}
		out = append(out, ShardHash{Shard: id, Applied: applied, Hash: h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out, nil
}
