package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/shard"
	"github.com/cairn-db/cairn/internal/store"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// joinTimeout bounds a joining node's attempts (every --join URL, over and
// over while the cluster answers "not ready").
const joinTimeout = time.Minute

// join asks the cluster at cfg.Join to admit this node and returns the
// identity it starts with: no replica, the members as peers, the
// cluster's shard map. A refusal (id in use, id removed) is final.
func (s *Server) join() (identity, error) {
	cfg := s.cfg
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	req := client.JoinRequest{NodeID: cfg.NodeID, HTTPAddr: cfg.HTTPAddr, PeerAddr: cfg.PeerAddr, Role: cfg.Role}
	var last error
	for {
		for _, u := range cfg.Join {
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := client.NewAdmin(u, nil).Join(actx, req)
			acancel()
			if err == nil {
				s.log.Info("joined the cluster", "via", u, "members", len(resp.Members))
				return joinedIdentity(cfg.NodeID, resp)
			}
			var ae *client.Error
			if errors.As(err, &ae) && (ae.Status == http.StatusConflict || ae.Status == http.StatusGone || ae.Status == http.StatusBadRequest) {
				return identity{}, fmt.Errorf("server: the cluster at %s refused node %d: %s", u, cfg.NodeID, ae.Message)
			}
			last = err
			s.log.Warn("join attempt failed; retrying", "via", u, "err", err)
		}
		select {
		case <-ctx.Done():
			return identity{}, fmt.Errorf("server: could not join through %v within %s: %w", cfg.Join, joinTimeout, last)
		case <-time.After(time.Second):
		}
	}
}

func joinedIdentity(id uint64, resp client.JoinResponse) (identity, error) {
	var m shard.Map
	if err := json.Unmarshal(resp.Shards, &m.Shards); err != nil {
		return identity{}, fmt.Errorf("server: the join answer's shards: %w", err)
	}
	if err := m.Validate(); err != nil {
		return identity{}, fmt.Errorf("server: the join answer's shards: %w", err)
	}
	peers, https := map[uint64]string{}, map[uint64]string{}
	for _, mem := range resp.Members {
		if mem.State != string(cluster.Removed) && mem.State != string(cluster.Dead) {
			peers[mem.ID] = mem.PeerAddr
			if mem.HTTPAddr != "" && mem.ID != id {
				https[mem.ID] = mem.HTTPAddr
			}
		}
	}
	if resp.Replication < 1 {
		return identity{}, fmt.Errorf("server: the join answer's replication %d", resp.Replication)
	}
	return identity{NodeID: id, Replication: resp.Replication, Peers: peers, HTTPAddrs: https, Map: m, Joined: true}, nil
}

// recordKV is the membership record's KV: the coordinator's linearizable
// read and compare-and-set write.
type recordKV struct{ c *kv.Coordinator }

func (r recordKV) Get(ctx context.Context, key []byte) ([]byte, uint64, error) {
	v, err := r.c.Get(ctx, key, kv.ReadOptions{})
	if errors.Is(err, kv.ErrNotFound) {
		return nil, 0, cluster.ErrKeyNotFound
	}
	return v.Data, v.Version, err
}

func (r recordKV) CompareAndSet(ctx context.Context, key, value []byte, version uint64) (uint64, error) {
	opts := kv.WriteOptions{Cond: kv.CondIfMatch, Version: version}
	if version == 0 {
		opts.Cond = kv.CondIfAbsent
	}
	v, _, err := r.c.Put(ctx, key, value, opts)
	if errors.Is(err, kv.ErrPreconditionFailed) {
		return 0, cluster.ErrVersionMismatch
	}
	return v, err
}

// prober asks a node for its NodeInfo over the transport.
type prober struct {
	self uint64
	tr   transport.Transport
}

func (p prober) Alive(ctx context.Context, node uint64) bool {
	_, err := p.info(ctx, node)
	return err == nil
}

// Replicas returns the descriptors of node's local replicas, from its
// NodeInfo.
func (p prober) Replicas(ctx context.Context, node uint64) ([]shard.Descriptor, error) {
	resp, err := p.info(ctx, node)
	if err != nil {
		return nil, err
	}
	var info wire.NodeInfo
	if err := info.Unmarshal(resp.Value); err != nil {
		return nil, fmt.Errorf("server: node %d's node info: %w", node, err)
	}
	out := make([]shard.Descriptor, 0, len(info.Descriptors))
	for _, b := range info.Descriptors {
		d, err := shard.UnmarshalDescriptor(b)
		if err != nil {
			return nil, fmt.Errorf("server: node %d's node info: %w", node, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// info asks node for its NodeInfo.
func (p prober) info(ctx context.Context, node uint64) (*wire.Response, error) {
	req := &wire.Request{Kind: wire.KindNodeInfo, Sender: p.self}
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineUnixNano = dl.UnixNano()
	}
	resp, err := p.tr.Request(ctx, node, req)
	if err != nil {
		return nil, err
	}
	if resp.Status != wire.StatusOK {
		return nil, fmt.Errorf("server: node %d answered node info with status %d: %s", node, resp.Status, resp.Message)
	}
	return resp, nil
}

// ErrMovesUnsupported: this build's store cannot move replicas yet.
var ErrMovesUnsupported = errors.New("server: replica moves are not supported by this store")

// The store is the balancer's Mover (buildMembership checks it at run
// time; this says at build time that it still is).
var _ cluster.Mover = (*store.Store)(nil)

// staticMover gives the balancer the node's shard map and refuses moves:
// the store that moves replicas replaces it (Config.Mover).
type staticMover struct{ m shard.Map }

func (f staticMover) Descriptors() []shard.Descriptor     { return f.m.Shards }
func (staticMover) LearnDescriptor(shard.Descriptor) bool { return false }
func (staticMover) MoveReplica(context.Context, uint64, uint64, uint64) error {
	return ErrMovesUnsupported
}
func (staticMover) AddReplica(context.Context, uint64, uint64, bool) error {
	return ErrMovesUnsupported
}
func (staticMover) RemoveReplica(context.Context, uint64, uint64) error { return ErrMovesUnsupported }

// manualPause is how long a replica moved by hand pauses rebalancing,
// cluster-wide.
const manualPause = 2 * time.Minute

// handMover is the coordinator's replica move by hand (POST
// /v1/admin/shards/{id}/move), in builds that have it.
type handMover interface {
	MoveReplica(ctx context.Context, shardID, from, to uint64) (shard.Descriptor, error)
}

// apiBackend is the coordinator as the HTTP API sees it: a replica moved
// by hand first pauses rebalancing for manualPause, so whichever node
// balances does not move it back at once.
type apiBackend struct {
	*kv.Coordinator
	s *Server
}

// MoveReplica implements the API's replica move.
func (b apiBackend) MoveReplica(ctx context.Context, shardID, from, to uint64) (shard.Descriptor, error) {
	m, ok := any(b.Coordinator).(handMover)
	if !ok {
		return shard.Descriptor{}, ErrMovesUnsupported
	}
	if err := b.s.refuseReadReplica(to); err != nil {
		return shard.Descriptor{}, err // (before the pause: a refused move pauses nothing)
	}
	if err := b.s.members.PauseRebalancing(ctx, time.Now().Add(manualPause)); err != nil {
		b.s.log.Warn("a replica moved by hand: pausing rebalancing", "err", err)
	}
	return m.MoveReplica(ctx, shardID, from, to)
}

// membership serves the admin API's membership routes.
type membership struct {
	mgr *cluster.Manager
	bal *cluster.Balancer
}

func (m membership) Nodes(ctx context.Context) (cluster.Record, uint64, error) {
	return m.mgr.ReadVersion(ctx)
}
func (m membership) Join(ctx context.Context, req cluster.JoinRequest) (cluster.JoinResponse, error) {
	return m.mgr.Join(ctx, req)
}
func (m membership) Decommission(ctx context.Context, id uint64) (cluster.Member, error) {
	return m.mgr.Decommission(ctx, id)
}
func (m membership) RemoveDead(ctx context.Context, id uint64) (cluster.Member, error) {
	return m.mgr.RemoveDead(ctx, id)
}
func (m membership) SetSettings(ctx context.Context, st cluster.Settings) (cluster.Settings, error) {
	return m.mgr.SetSettings(ctx, st)
}
func (m membership) Balancer() cluster.BalancerStatus { return m.bal.Status() }

// buildMembership makes the manager and balancer (after the coordinator).
func (s *Server) buildMembership(id identity) error {
	var err error
	// The store moves replicas once it can (it then implements
	// cluster.Mover); until then the balancer plans but moves nothing.
	var descs cluster.Mover = staticMover{id.Map}
	if m, ok := any(s.store).(cluster.Mover); ok {
		descs = m
	}
	s.members, err = cluster.NewManager(cluster.ManagerConfig{
		NodeID: id.NodeID, KV: recordKV{s.coord}, Replication: id.Replication,
		Descriptors: descs.Descriptors, PollInterval: s.cfg.MembersPoll, OnChange: s.membersChanged,
		Fallback: s.readThroughPeer, Logger: s.log,
	})
	if err != nil {
		return err
	}
	s.balancer, err = cluster.NewBalancer(cluster.BalancerConfig{
		NodeID: id.NodeID, Manager: s.members, Mover: descs, Prober: prober{self: id.NodeID, tr: s.nodeTr},
		Leads: s.leadsShardOne, Replication: id.Replication, DeadNodeTimeout: s.cfg.DeadNodeTimeout,
		TransferLimit: s.cfg.TransferLimit, Logger: s.log,
	})
	return err
}

// leadsShardOne reports whether this node leads the first shard of the
// map (shard 1 at bootstrap): the balancer runs there.
func (s *Server) leadsShardOne() bool {
	r := s.store.Replica(1)
	return r != nil && r.IsLeader()
}

// startMembership starts, under s.bg: writing or confirming the record
// (bootstrap from --initial-cluster, then this node's addresses), the
// record's poll, and the balancer.
func (s *Server) startMembership() {
	ctx := s.bgCtx
	s.goBG(func() {
		for try := 0; ; try++ {
			err := s.registerSelf(ctx)
			if err == nil || ctx.Err() != nil {
				return
			}
			if errors.Is(err, cluster.ErrRemoved) {
				s.markRemoved(err)
				return
			}
			if errors.Is(err, cluster.ErrAddrInUse) {
				s.refuse(err)
				return
			}
			if try%30 == 29 {
				s.log.Warn("membership: registering this node", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	s.goBG(func() { s.members.Run(ctx) })
	s.goBG(func() { s.balancer.Run(ctx) })
	s.goBG(func() { s.coord.RunLagSampler(ctx) })
}

// registerSelf writes the record if this node bootstraps the cluster and
// none exists, then records this node's addresses in it.
func (s *Server) registerSelf(ctx context.Context) error {
	s.idMu.Lock()
	joined, peers := s.identity.Joined, maps.Clone(s.identity.Peers)
	s.idMu.Unlock()
	if !joined && len(peers) > 0 {
		if _, err := s.members.Bootstrap(ctx, peers); err != nil {
			return err
		}
	}
	_, err := s.members.Register(ctx, advertised(s.HTTPAddr()), advertised(s.tr.Addr()))
	return err
}

// advertised is a listen address as others can dial it: "" (keep what
// the record has) when its host is unspecified (0.0.0.0, ::).
func advertised(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return addr
}

// checkJoinAddr checks an address a joining node tells the cluster.
func checkJoinAddr(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || advertised(addr) == "" || host == "" || port == "0" {
		return fmt.Errorf("server: --join needs %s as host:port that other nodes can dial (not %q)", flag, addr)
	}
	return nil
}

// readThroughPeer reads the record through another member's HTTP API
// (GET /v1/admin/nodes, a linearizable read there), the members tried in
// turn from the next after the last that answered.
func (s *Server) readThroughPeer(ctx context.Context) (cluster.Record, uint64, error) {
	var others []string // HTTP addresses
	if rec, ok := s.members.Cached(); ok {
		for _, m := range rec.Members {
			if m.ID != s.identity.NodeID && !m.State.Gone() && m.HTTPAddr != "" {
				others = append(others, m.HTTPAddr)
			}
		}
	} else {
		// Not read yet since the start: the addresses persisted from
		// the last record read (otherHTTPAddrs).
		s.idMu.Lock()
		others = otherHTTPAddrs(s.identity)
		s.idMu.Unlock()
	}
	if len(others) == 0 {
		return cluster.Record{}, 0, cluster.ErrNotReady
	}
	start := int(s.fallbackNext.Add(1))
	var last error
	for i := range others {
		addr := others[(start+i)%len(others)]
		n, err := client.NewAdmin(addr, nil).Nodes(ctx)
		if err != nil {
			last = err
			continue
		}
		return recordOfNodes(n), n.Version, nil
	}
	return cluster.Record{}, 0, last
}

// recordOfNodes is the membership record a peer's GET /v1/admin/nodes
// describes, whole: every member's role, the settings and the pause too,
// since a record read this way stands for its version until the next
// change (a restarted node whose first reads failed kept a read
// replica's role out of /v1/cluster until then).
func recordOfNodes(n client.Nodes) cluster.Record {
	out := cluster.Record{UsedIDs: n.UsedIDs, PausedUntil: n.PausedUntil,
		Settings: cluster.Settings{TransferLimit: n.Settings.TransferLimit, SnapshotRate: n.Settings.SnapshotRate, Rebalance: n.Settings.Rebalance}}
	for _, cm := range n.Members {
		out.Members = append(out.Members, cluster.Member{ID: cm.ID, HTTPAddr: cm.HTTPAddr, PeerAddr: cm.PeerAddr,
			State: cluster.State(cm.State), Role: cluster.Role(cm.Role), DropLearners: cm.DropLearners})
	}
	return out
}

// membersChanged applies a new record: the transport's address book,
// the coordinator's member list, the persisted peers, and this node's own
// removal.
func (s *Server) membersChanged(rec cluster.Record) {
	var ms []kv.Member
	for _, m := range rec.Members {
		if m.State == cluster.Removed {
			// Drained: it holds nothing. A dead node stays in the book:
			// should it still run, it keeps hearing from its shards until
			// they replace it, and learns its state.
			s.tr.RemovePeer(m.ID)
			continue
		}
		if err := s.tr.SetPeer(m.ID, m.PeerAddr); err != nil {
			s.log.Warn("membership: peer address", "peer", m.ID, "addr", m.PeerAddr, "err", err)
		}
		if m.State == cluster.Dead {
			continue
		}
		ms = append(ms, kv.Member{ID: m.ID, HTTPAddr: m.HTTPAddr, PeerAddr: m.PeerAddr, State: string(m.State), Role: string(m.Role)})
	}
	s.coord.SetMembers(ms)
	readers := map[uint64]bool{}
	for _, m := range rec.Members {
		if m.ReadReplica() && !m.State.Gone() {
			readers[m.ID] = true
		}
	}
	if s.store != nil {
		s.store.SetReadReplicas(readers)
	}
	s.noteRole(rec)
	if me, ok := rec.Member(s.identity.NodeID); ok && me.State.Gone() {
		s.markRemoved(fmt.Errorf("%w: node %d is %s", cluster.ErrRemoved, me.ID, me.State))
		return
	}
	https := map[uint64]string{}
	for _, m := range rec.Members {
		if m.ID != s.identity.NodeID && !m.State.Gone() && m.HTTPAddr != "" {
			https[m.ID] = m.HTTPAddr
		}
	}
	s.idMu.Lock()
	same := maps.Equal(rec.Peers(), s.identity.Peers) && maps.Equal(https, s.identity.HTTPAddrs)
	s.idMu.Unlock()
	if peers := rec.Peers(); !same {
		s.idMu.Lock()
		s.identity.Peers, s.identity.HTTPAddrs = peers, https
		id := s.identity
		s.idMu.Unlock()
		if err := saveIdentity(s.eng, id); err != nil {
			s.log.Warn("membership: persisting the peers", "err", err)
		}
	}
	if r := rec.Settings.SnapshotRate; r != nil && s.snapshotRate.Swap(*r) != *r {
		s.tr.SetSnapshotRate(*r)
		s.log.Info("snapshot rate set", "bytes_per_sec", *r)
	}
}

// markRemoved persists that this node left the cluster for good and
// tells Removed's readers.
func (s *Server) markRemoved(why error) {
	s.removedOnce.Do(func() {
		s.log.Error("this node was removed from the cluster; it will refuse to start again", "why", why)
		s.idMu.Lock()
		s.identity.Removed = true
		id := s.identity
		s.idMu.Unlock()
		if err := saveIdentity(s.eng, id); err != nil {
			s.log.Warn("membership: persisting the removal", "err", err)
		}
		close(s.removed)
	})
}

// Removed is closed when this node learns it was removed from the
// cluster (decommissioned or declared dead): `cairn serve` exits.
func (s *Server) Removed() <-chan struct{} { return s.removed }

// refuse tells Refused's reader that the cluster refused this node's
// addresses: another member uses one of them. The record keeps the
// addresses it had for this node, which its peers go on dialling.
func (s *Server) refuse(why error) {
	s.log.Error("the cluster refused this node's addresses: another member uses one; "+
		"restart it with its own --http-addr and --peer-addr", "err", why)
	select {
	case s.refused <- fmt.Errorf("server: the cluster refused node %d's addresses: %w; "+
		"restart it with addresses no other member uses (cairn admin node list shows them)", s.cfg.NodeID, why):
	default:
	}
}

// Refused delivers, once, the cluster's refusal of the addresses this
// node started with (another member's HTTP or peer address, which would
// send that member's clients or raft traffic here): `cairn serve` exits
// with it.
func (s *Server) Refused() <-chan error { return s.refused }

// SnapshotRate is the snapshot rate in force in bytes/s (0: unlimited):
// the --snapshot-rate flag until PUT /v1/admin/settings sets one for the
// cluster. The transport paces this node's outgoing snapshot streams to
// it, all together.
func (s *Server) SnapshotRate() int64 { return s.snapshotRate.Load() }

// goBG runs f under s.bg.
func (s *Server) goBG(f func()) {
	s.bg.Add(1)
	go func() { defer s.bg.Done(); f() }()
}

// removedError is the error of a node whose data dir says it was removed.
func removedError(id uint64) error {
	return fmt.Errorf("server: node %d was removed from the cluster (its data dir says so) and cannot rejoin; "+
		"start a new node with a new --node-id and an empty --data-dir", id)
}

// otherHTTPAddrs lists the other members' client addresses id persisted,
// in id order.
func otherHTTPAddrs(id identity) []string {
	ids := slices.Sorted(maps.Keys(id.HTTPAddrs))
	var out []string
	for _, n := range ids {
		if n == id.NodeID || id.HTTPAddrs[n] == "" {
			continue
		}
		out = append(out, id.HTTPAddrs[n])
	}
	return out
}
