package kv

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Status describes this node.
func (c *Coordinator) Status() NodeStatus {
	st := NodeStatus{
		NodeID: c.cfg.NodeID, HTTPAddr: c.cfg.HTTPAddr, PeerAddr: c.cfg.PeerAddr,
		Replication: c.cfg.Replication, ShardCount: len(c.cfg.Map.Shards), Version: c.cfg.Version,
	}
	for _, r := range c.cfg.Store.Replicas() {
		st.Replicas++
		if r.IsLeader() {
			st.Leaders++
		}
	}
	st.Uptime = time.Since(c.started)
	st.UptimeSec = st.Uptime.Seconds()
	return st
}

// Cluster describes the members and shards as this node sees them.
func (c *Coordinator) Cluster(ctx context.Context) ClusterInfo {
	ci := ClusterInfo{NodeID: c.cfg.NodeID, Replication: c.cfg.Replication}
	for id, addr := range c.cfg.Peers {
		m := MemberInfo{NodeID: id, PeerAddr: addr, Reachable: c.cfg.Transport.Reachable(id)}
		if id == c.cfg.NodeID {
			m.HTTPAddr, m.Reachable = c.cfg.HTTPAddr, true
		}
		ci.Members = append(ci.Members, m)
	}
	sort.Slice(ci.Members, func(i, j int) bool { return ci.Members[i].NodeID < ci.Members[j].NodeID })
	for _, d := range c.cfg.Map.Shards {
		si := ShardInfo{
			ID: d.ID, TokenStart: fmt.Sprintf("%016x", d.Start), TokenEnd: fmt.Sprintf("%016x", d.End),
			Epoch: d.Epoch, Replicas: d.Replicas, Leader: c.leaderGuess(d),
		}
		if d.End == 0 {
			si.TokenEnd = "10000000000000000"
		}
		if r := c.cfg.Store.Replica(d.ID); r != nil {
			si.Term, si.Applied = r.Term(), r.Applied()
		}
		ci.Shards = append(ci.Shards, si)
	}
	return ci
}

// ShardHashes fingerprints every local replica, in shard order.
func (c *Coordinator) ShardHashes() ([]ShardHash, error) {
	var out []ShardHash
	for _, d := range c.cfg.Map.Shards {
		r := c.cfg.Store.Replica(d.ID)
		if r == nil {
			continue
		}
		applied, h, err := r.Hash()
		if err != nil {
			return nil, err
		}
		out = append(out, ShardHash{Shard: d.ID, Applied: applied, Hash: h})
	}
	return out, nil
}
